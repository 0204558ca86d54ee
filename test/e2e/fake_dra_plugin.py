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
messages are built at run time with kubelet_plugin.py's helpers, as fake_gpu_plugin.py's are.
"""

from __future__ import annotations

import argparse
import logging
import threading

from kubelet_plugin import KubeletPlugin, message_classes, run, unary  # same directory: on sys.path when run

# Field names and numbers of k8s.io/kubelet pkg/apis/dra/v1/api.proto. Its two responses hold a
# map<string, Result> keyed by claim UID; on the wire a map is a repeated entry message
# {key = 1, value = 2}, so it is declared as one here (message_classes' "map" is string -> string).
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


class FakeDraDriver(KubeletPlugin):
    plugin_type = "DRAPlugin"
    # For DRA the "versions" are the gRPC services offered; the kubelet takes the first it knows.
    supported_versions = ["v1.DRAPlugin"]

    def __init__(self, args: argparse.Namespace, stop: threading.Event) -> None:
        super().__init__(args.driver, args.root_dir, f"{args.driver}/dra.sock", f"{args.driver}-reg.sock", stop,
                         log)

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

    def run(self) -> None:
        self.serve_until_stopped(f"{DRA_PACKAGE}.DRAPlugin", {
            "NodePrepareResources": unary(self.prepare, "NodePrepareResourcesRequest",
                                          "NodePrepareResourcesResponse", DRA),
            "NodeUnprepareResources": unary(self.unprepare, "NodeUnprepareResourcesRequest",
                                            "NodeUnprepareResourcesResponse", DRA),
        }, f"driver {self.name}")

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root-dir", required=True, help="the kubelet's --root-dir")
    ap.add_argument("--driver", default="compute-domain.nvidia.com",
                    help="the DRA driver's name (default compute-domain.nvidia.com)")
    run(ap, lambda args, stop: FakeDraDriver(args, stop).run())

if __name__ == "__main__":
    main()
