#!/usr/bin/env python3
"""A stand-in kubelet plugin for a DRA driver (by default NVIDIA's compute-domain.nvidia.com).

    fake_dra_plugin.py --root-dir KUBELET_ROOT [--driver compute-domain.nvidia.com]

The operator gives every slurmd pod a ResourceClaim of NVIDIA's compute-domain driver. On the test
bed's real node no such driver runs, and the kubelet starts no container of a pod whose claims no
plugin has prepared. This plugin lets the real kubelet prepare and unprepare them: it answers
NodePrepareResources with success and no devices, and NodeUnprepareResources with success.

Why no devices: the kubelet keeps the devices of a prepare answer only to hand their CDI device
ids to the runtime (and to the pod-resources API); it requires nothing but one result per claim
UID, with no error (pkg/kubelet/cm/dra/manager.go). The bed's containerd 1.6 has no CDI, so ids
would break the container's creation; and the request carries only the claim's UID, name and
namespace, so naming the allocated devices would need the API, which this plugin keeps out of.
Whoever needs the claims allocated publishes the driver's ResourceSlice (the kubelet deletes its
Node's ResourceSlices when it starts, and a driver's 30 s after its plugin went away).

It registers through the kubelet's plugin watcher (KUBELET_ROOT/plugins_registry/<driver>-reg.sock)
as a "DRAPlugin" that offers the service "v1.DRAPlugin" (k8s.io/kubelet pkg/apis/dra/v1) at
KUBELET_ROOT/plugins/<driver>/dra.sock. The kubelet 1.34 also knows a DRAResourceHealth service,
but calls it only with the alpha gate ResourceHealthStatus; gRPC answers UNIMPLEMENTED to it and
to any other method. SIGTERM or SIGINT stops the plugin and removes its sockets.

Run by scripts/testbed (`up --with-node --fake-compute-domain`). Needs grpcio and protobuf; the
messages are built at run time like fake_gpu_plugin.py's, with that file's helpers.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from concurrent import futures
from pathlib import Path

import grpc

from fake_gpu_plugin import REG, message_classes, unary  # same directory: on sys.path when run

# Field names and numbers of k8s.io/kubelet pkg/apis/dra/v1/api.proto. Its two responses hold a
# map<string, Result> keyed by claim UID; on the wire a map is a repeated entry message
# {key = 1, value = 2}, so it is declared as one here (fake_gpu_plugin's "map" is string -> string).
DRA_PACKAGE = "k8s.io.kubelet.pkg.apis.dra.v1"  # the package is part of the gRPC method path
DRA_API = {
    "Claim": [("namespace", 1, "string"), ("uid", 2, "string"), ("name", 3, "string")],
    "NodePrepareResourcesRequest": [("claims", 1, "[]Claim")],
    "NodePrepareResourcesResponse": [("claims", 1, "[]PrepareEntry")],
    "PrepareEntry": [("key", 1, "string"), ("value", 2, "NodePrepareResourceResponse")],
    "NodePrepareResourceResponse": [("devices", 1, "[]Device"), ("error", 2, "string")],
    "Device": [("request_names", 1, "[]string"), ("pool_name", 2, "string"), ("device_name", 3, "string"),
               ("cdi_device_ids", 4, "[]string")],
    "NodeUnprepareResourcesRequest": [("claims", 1, "[]Claim")],
    "NodeUnprepareResourcesResponse": [("claims", 1, "[]UnprepareEntry")],
    "UnprepareEntry": [("key", 1, "string"), ("value", 2, "NodeUnprepareResourceResponse")],
    "NodeUnprepareResourceResponse": [("error", 1, "string")],
}
DRA = message_classes(DRA_PACKAGE, DRA_API)

log = logging.getLogger("fake-dra-plugin")


class FakeDraDriver:
    def __init__(self, args: argparse.Namespace, stop: threading.Event) -> None:
        self.driver, self.stop = args.driver, stop
        root = Path(args.root_dir).resolve()
        # Outside plugins_registry: the watcher takes every socket there for a registration socket.
        self.plugin_socket = root / "plugins" / self.driver / "dra.sock"
        self.registration_socket = root / "plugins_registry" / f"{self.driver}-reg.sock"

    @staticmethod
    def claims(request) -> str:
        return ", ".join(f"{c.namespace}/{c.name} ({c.uid})" for c in request.claims)

    # k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin

    def prepare(self, request, _context):
        log.info("NodePrepareResources: %s", self.claims(request))
        # An empty result per claim: success, no devices, hence no CDI device ids (see above).
        return DRA["NodePrepareResourcesResponse"](
            claims=[DRA["PrepareEntry"](key=c.uid, value=DRA["NodePrepareResourceResponse"]()) for c in request.claims])

    def unprepare(self, request, _context):
        log.info("NodeUnprepareResources: %s", self.claims(request))
        return DRA["NodeUnprepareResourcesResponse"](
            claims=[DRA["UnprepareEntry"](key=c.uid, value=DRA["NodeUnprepareResourceResponse"]())
                    for c in request.claims])

    # pluginregistration.Registration

    def get_info(self, _request, _context):
        log.info("GetInfo from the kubelet's plugin watcher")
        # For DRA the "versions" are the gRPC services offered; the kubelet takes the first it knows.
        return REG["PluginInfo"](type="DRAPlugin", name=self.driver, endpoint=str(self.plugin_socket),
                                 supported_versions=["v1.DRAPlugin"])

    def notify_registration_status(self, request, _context):
        if request.plugin_registered:
            log.info("registered with the kubelet as %s", self.driver)  # scripts/testbed up waits for this
        else:
            log.error("the kubelet refused the registration: %s", request.error)
        return REG["RegistrationStatusResponse"]()

    def serve(self, socket: Path, service: str, handlers: dict) -> grpc.Server:
        socket.parent.mkdir(parents=True, exist_ok=True)
        socket.unlink(missing_ok=True)  # a previous run's, if it was killed
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        return server

    def run(self) -> None:
        plugin = self.serve(self.plugin_socket, f"{DRA_PACKAGE}.DRAPlugin", {
            "NodePrepareResources": unary(self.prepare, "NodePrepareResourcesRequest",
                                          "NodePrepareResourcesResponse", DRA),
            "NodeUnprepareResources": unary(self.unprepare, "NodeUnprepareResourcesRequest",
                                            "NodeUnprepareResourcesResponse", DRA),
        })
        # Registration socket last: the kubelet connects to the plugin's socket once it has GetInfo.
        registration = self.serve(self.registration_socket, "pluginregistration.Registration", {
            "GetInfo": unary(self.get_info, "InfoRequest", "PluginInfo", REG),
            "NotifyRegistrationStatus": unary(self.notify_registration_status, "RegistrationStatus",
                                              "RegistrationStatusResponse", REG),
        })
        log.info("driver %s at %s; registration socket %s", self.driver, self.plugin_socket, self.registration_socket)
        self.stop.wait()
        # Registration socket first: its removal is what makes the kubelet deregister the plugin.
        registration.stop(grace=1).wait()
        self.registration_socket.unlink(missing_ok=True)
        plugin.stop(grace=1).wait()
        self.plugin_socket.unlink(missing_ok=True)
        log.info("stopped")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root-dir", required=True, help="the kubelet's --root-dir")
    ap.add_argument("--driver", default="compute-domain.nvidia.com",
                    help="the DRA driver's name (default compute-domain.nvidia.com)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    FakeDraDriver(args, stop).run()


if __name__ == "__main__":
    main()
