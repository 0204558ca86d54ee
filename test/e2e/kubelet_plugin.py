"""What the bed's stand-in kubelet plugins share: proto3 message classes built at run time from
descriptors (no generated code, no copied .proto files), and registration through the kubelet's
plugin watcher (k8s.io/kubelet pkg/apis/pluginregistration/v1) with the serving and stopping
that goes with it. Test code, used by fake_gpu_plugin.py and fake_dra_plugin.py.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from concurrent import futures
from pathlib import Path

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F
from google.protobuf.descriptor_pb2 import FileDescriptorProto

SCALARS = {"string": F.TYPE_STRING, "bool": F.TYPE_BOOL, "int32": F.TYPE_INT32, "int64": F.TYPE_INT64}

REGISTRATION_API = {
    "PluginInfo": [("type", 1, "string"), ("name", 2, "string"), ("endpoint", 3, "string"),
                   ("supported_versions", 4, "[]string")],
    "RegistrationStatus": [("plugin_registered", 1, "bool"), ("error", 2, "string")],
    "RegistrationStatusResponse": [],
    "InfoRequest": [],
}


def message_classes(package: str, api: dict) -> dict[str, type]:
    """The message classes of one proto3 package, from a FileDescriptorProto made here."""
    fd = FileDescriptorProto(name=f"tightrope/kubelet_plugin/{package}.proto", package=package, syntax="proto3")
    for name, fields in api.items():
        msg = fd.message_type.add(name=name)
        for fname, number, ftype in fields:
            f = msg.field.add(name=fname, number=number, label=F.LABEL_OPTIONAL)
            if ftype == "map":
                # A map field is, on the wire and in the descriptor, a repeated nested entry message.
                entry = msg.nested_type.add(name=fname.title().replace("_", "") + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
                entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
                f.label, f.type, f.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, f".{package}.{name}.{entry.name}"
                continue
            if ftype.startswith("[]"):
                f.label, ftype = F.LABEL_REPEATED, ftype[2:]
            if ftype in SCALARS:
                f.type = SCALARS[ftype]
            else:
                f.type, f.type_name = F.TYPE_MESSAGE, f".{package}.{ftype}"
    pool = descriptor_pool.DescriptorPool()  # our own: nothing else in the process can clash with it
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
            for name in api}



REG = message_classes("pluginregistration", REGISTRATION_API)


def unary(fn, request: str, response: str, types: dict):
    return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=types[request].FromString,
                                               response_serializer=types[response].SerializeToString)



class KubeletPlugin:
    """A plugin the kubelet finds through a socket in <root-dir>/plugins_registry, serving its
    own service on a socket outside it (the watcher takes every socket there for a registration
    socket). Subclasses name the plugin and give the service's handlers."""

    plugin_type = ""  # "DevicePlugin", "DRAPlugin"
    supported_versions: list[str] = []

    def __init__(self, name: str, root_dir: str, plugin_socket: str, registration_socket: str,
                 stop: threading.Event, log: logging.Logger) -> None:
        self.name, self.stop, self.log = name, stop, log
        root = Path(root_dir).resolve()
        self.plugin_socket = root / "plugins" / plugin_socket
        self.registration_socket = root / "plugins_registry" / registration_socket

    def get_info(self, _request, _context):
        self.log.info("GetInfo from the kubelet's plugin watcher")
        return REG["PluginInfo"](type=self.plugin_type, name=self.name, endpoint=str(self.plugin_socket),
                                 supported_versions=self.supported_versions)

    def notify_registration_status(self, request, _context):
        if request.plugin_registered:
            self.log.info("registered with the kubelet as %s", self.name)  # scripts/testbed up waits for this
        else:
            self.log.error("the kubelet refused the registration: %s", request.error)
        return REG["RegistrationStatusResponse"]()

    @staticmethod
    def serve(socket: Path, service: str, handlers: dict) -> grpc.Server:
        socket.parent.mkdir(parents=True, exist_ok=True)
        socket.unlink(missing_ok=True)  # a previous run's, if it was killed
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        return server

    def serve_until_stopped(self, service: str, handlers: dict, banner: str) -> None:
        plugin = self.serve(self.plugin_socket, service, handlers)
        # Registration socket last: the kubelet connects to the plugin's socket as soon as it has
        # the endpoint from GetInfo.
        registration = self.serve(self.registration_socket, "pluginregistration.Registration", {
            "GetInfo": unary(self.get_info, "InfoRequest", "PluginInfo", REG),
            "NotifyRegistrationStatus": unary(self.notify_registration_status, "RegistrationStatus",
                                              "RegistrationStatusResponse", REG),
        })
        self.log.info("%s at %s; registration socket %s", banner, self.plugin_socket, self.registration_socket)
        self.stop.wait()
        # Registration socket first: its removal is what makes the kubelet deregister the plugin.
        registration.stop(grace=1).wait()
        self.registration_socket.unlink(missing_ok=True)
        plugin.stop(grace=1).wait()
        self.plugin_socket.unlink(missing_ok=True)
        self.log.info("stopped")


def run(parser: argparse.ArgumentParser, start) -> None:
    """Parses the command line, logs to stderr, and runs start(args, stop) until SIGTERM/SIGINT."""
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    start(args, stop)
