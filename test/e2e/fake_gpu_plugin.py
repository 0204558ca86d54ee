#!/usr/bin/env python3
"""A stand-in GPU device plugin for the test bed's real node: no GPU, the real kubelet.

    fake_gpu_plugin.py --root-dir KUBELET_ROOT --devices-dir DIR [--count N] [--resource nvidia.com/gpu]

It makes N character devices DIR/nvidia<i> (major 195, minor i, as NVIDIA's driver numbers them)
and offers them to the kubelet as healthy devices gpu-<i> of the resource, so that tests see the
kubelet's device manager, the scheduler and containerd do for real what they do with GPUs: count
them in the Node's capacity, refuse a pod that asks more than are free, and put the allocated
device nodes and NVIDIA_VISIBLE_DEVICES into the container. It also writes the files NVIDIA's
driver shows that Slurm's AutoDetect=nvidia reads: /proc/driver/nvidia/gpus under DIR/driver, and
/sys/bus/pci/drivers/nvidia (each GPU's local CPUs) under DIR/sys-pci-drivers.

It registers through the kubelet's plugin watcher (a socket in KUBELET_ROOT/plugins_registry),
not /var/lib/kubelet/device-plugins: that directory is fixed in the kubelet, whatever its
--root-dir, so it is host-wide, while plugins_registry is the bed's own. The kubelet re-registers
it by itself when either side restarts, as long as the socket is there.

Run by scripts/testbed (`up --with-node --fake-gpus N`). Needs grpcio and protobuf, and no
generated code: the messages are built at run time from descriptors written below, with the field
names and numbers of the kubelet's api.proto files (k8s.io/kubelet pkg/apis/deviceplugin/v1beta1
and pkg/apis/pluginregistration/v1). SIGTERM or SIGINT stops it and removes its sockets.
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
import threading
from pathlib import Path

import grpc
from kubelet_plugin import KubeletPlugin, message_classes, run, unary  # same directory: on sys.path when run

NVIDIA_MAJOR = 195  # the character major of /dev/nvidia<minor>

# message -> [(field, number, type)]; "[]T" is repeated, "map" is map<string, string>. Only the
# messages the two services use.
DEVICE_PLUGIN_API = {
    "Empty": [],
    "DevicePluginOptions": [("pre_start_required", 1, "bool"),
                            ("get_preferred_allocation_available", 2, "bool")],
    "ListAndWatchResponse": [("devices", 1, "[]Device")],
    "TopologyInfo": [("nodes", 1, "[]NUMANode")],
    "NUMANode": [("ID", 1, "int64")],
    "Device": [("ID", 1, "string"), ("health", 2, "string"), ("topology", 3, "TopologyInfo")],
    "PreStartContainerRequest": [("devices_ids", 1, "[]string")],
    "PreStartContainerResponse": [],
    "PreferredAllocationRequest": [("container_requests", 1, "[]ContainerPreferredAllocationRequest")],
    "ContainerPreferredAllocationRequest": [("available_deviceIDs", 1, "[]string"),
                                            ("must_include_deviceIDs", 2, "[]string"),
                                            ("allocation_size", 3, "int32")],
    "PreferredAllocationResponse": [("container_responses", 1, "[]ContainerPreferredAllocationResponse")],
    "ContainerPreferredAllocationResponse": [("deviceIDs", 1, "[]string")],
    "AllocateRequest": [("container_requests", 1, "[]ContainerAllocateRequest")],
    "ContainerAllocateRequest": [("devices_ids", 1, "[]string")],
    "CDIDevice": [("name", 1, "string")],
    "AllocateResponse": [("container_responses", 1, "[]ContainerAllocateResponse")],
    "ContainerAllocateResponse": [("envs", 1, "map"), ("mounts", 2, "[]Mount"), ("devices", 3, "[]DeviceSpec"),
                                  ("annotations", 4, "map"), ("cdi_devices", 5, "[]CDIDevice")],
    "Mount": [("container_path", 1, "string"), ("host_path", 2, "string"), ("read_only", 3, "bool")],
    "DeviceSpec": [("container_path", 1, "string"), ("host_path", 2, "string"), ("permissions", 3, "string")],
}

log = logging.getLogger("fake-gpu-plugin")


DP = message_classes("v1beta1", DEVICE_PLUGIN_API)

class FakeGpus(KubeletPlugin):
    plugin_type = "DevicePlugin"
    supported_versions = ["v1beta1"]

    def __init__(self, args: argparse.Namespace, stop: threading.Event) -> None:
        super().__init__(args.resource, args.root_dir, "fake-gpu/device-plugin.sock", "fake-gpu.sock", stop, log)
        self.devices_dir = Path(args.devices_dir).resolve()
        self.ids = [f"gpu-{i}" for i in range(args.count)]
        self.model = args.model

    def make_devices(self) -> None:
        self.devices_dir.mkdir(parents=True, exist_ok=True)
        for i in range(len(self.ids)):
            path = self.devices_dir / f"nvidia{i}"
            # Kept when right: a restarted plugin must not pull a device from under a running pod
            # (containerd looks the host path up again whenever the container is restarted).
            rdev = os.makedev(NVIDIA_MAJOR, i)
            if path.exists() and stat.S_ISCHR(path.stat().st_mode) and path.stat().st_rdev == rdev:
                continue
            path.unlink(missing_ok=True)
            os.mknod(path, 0o666 | stat.S_IFCHR, rdev)
            path.chmod(0o666)  # mknod's mode goes through the umask
        self.make_driver_files()

    def make_driver_files(self) -> None:
        """What NVIDIA's driver shows of the Node's GPUs, with the fields Slurm's AutoDetect=nvidia
        reads: /proc/driver/nvidia/gpus/<bus id>/information under DIR/driver (no container
        runtime lets a mount reach into /proc), and the CPUs each GPU is attached to,
        /sys/bus/pci/drivers/nvidia/<bus id>/local_cpulist, under DIR/sys-pci-drivers. Slurm
        binds an autodetected GPU to those CPUs: without them it binds it to none, and no job
        can be given it. A test mounts the two over a pod's /proc/driver and /sys/bus/pci/drivers.
        One NUMA node: every GPU is attached to every CPU of the host."""
        gpus = self.devices_dir / "driver/nvidia/gpus"
        sysfs = self.devices_dir / "sys-pci-drivers/nvidia"
        cpus = f"0-{os.cpu_count() - 1}"
        for i in range(len(self.ids)):
            bus_id = f"0000:{i + 1:02x}:00.0"
            (sysfs / bus_id).mkdir(parents=True, exist_ok=True)
            (sysfs / bus_id / "local_cpulist").write_text(cpus + "\n")
            bus = gpus / bus_id
            bus.mkdir(parents=True, exist_ok=True)
            (bus / "information").write_text(
                f"Model: \t\t {self.model}\nIRQ:   \t\t {40 + i}\n"
                f"GPU UUID: \t GPU-{i:08x}-0000-4000-8000-00000000{i:04x}\nVideo BIOS: \t ??.??.??.??.??\n"
                f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
                f"Bus Location: \t {bus_id}\nDevice Minor: \t {i}\nGPU Excluded:\t No\n")

    def device_index(self, device_id: str, context: grpc.ServicerContext) -> int:
        if device_id not in self.ids:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown device {device_id}")
        return int(device_id.removeprefix("gpu-"))

    # v1beta1.DevicePlugin

    def get_options(self, _request, _context):
        # GetPreferredAllocation is offered so that the kubelet exercises it too.
        return DP["DevicePluginOptions"](get_preferred_allocation_available=True)

    def list_and_watch(self, _request, context):
        log.info("ListAndWatch: sending %d healthy devices", len(self.ids))
        yield DP["ListAndWatchResponse"](devices=[DP["Device"](ID=i, health="Healthy") for i in self.ids])
        # The devices never change. The stream stays open: its end tells the kubelet the plugin has
        # gone (it then marks the devices unhealthy). It ends when we stop or the kubelet hangs up.
        while context.is_active() and not self.stop.wait(1):
            pass
        log.info("ListAndWatch: stream closed")

    def get_preferred_allocation(self, request, _context):
        response = DP["PreferredAllocationResponse"]()
        for c in request.container_requests:
            rest = [d for d in sorted(c.available_deviceIDs) if d not in c.must_include_deviceIDs]
            response.container_responses.add(
                deviceIDs=(list(c.must_include_deviceIDs) + rest)[:c.allocation_size])
        log.info("GetPreferredAllocation: %s", "; ".join(", ".join(c.deviceIDs) for c in response.container_responses))
        return response

    def allocate(self, request, context):
        response = DP["AllocateResponse"]()
        for c in request.container_requests:
            indexes = [self.device_index(d, context) for d in c.devices_ids]
            r = response.container_responses.add()
            for i in indexes:
                # The host's minor number is kept in the container, as NVIDIA's own plugin does.
                r.devices.add(host_path=str(self.devices_dir / f"nvidia{i}"), container_path=f"/dev/nvidia{i}",
                              permissions="rw")
            r.envs["NVIDIA_VISIBLE_DEVICES"] = ",".join(map(str, indexes))
            log.info("Allocate: %s", ", ".join(c.devices_ids))
        return response

    def pre_start_container(self, _request, _context):
        return DP["PreStartContainerResponse"]()

    def run(self) -> None:
        self.make_devices()
        self.serve_until_stopped("v1beta1.DevicePlugin", {
            "GetDevicePluginOptions": unary(self.get_options, "Empty", "DevicePluginOptions", DP),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self.list_and_watch, request_deserializer=DP["Empty"].FromString,
                response_serializer=DP["ListAndWatchResponse"].SerializeToString),
            "GetPreferredAllocation": unary(self.get_preferred_allocation, "PreferredAllocationRequest",
                                            "PreferredAllocationResponse", DP),
            "Allocate": unary(self.allocate, "AllocateRequest", "AllocateResponse", DP),
            "PreStartContainer": unary(self.pre_start_container, "PreStartContainerRequest",
                                       "PreStartContainerResponse", DP),
        }, f"{len(self.ids)} x {self.name} ({self.devices_dir}/nvidia0..{len(self.ids) - 1})")

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root-dir", required=True, help="the kubelet's --root-dir")
    ap.add_argument("--devices-dir", required=True, help="where the stand-in nvidia<i> devices are made")
    ap.add_argument("--count", type=int, default=4, help="devices to offer (default 4)")
    ap.add_argument("--resource", default="nvidia.com/gpu", help="extended resource name (default nvidia.com/gpu)")
    ap.add_argument("--model", default="NVIDIA H100 80GB HBM3",
                    help="the GPUs' model as the driver names it (default NVIDIA H100 80GB HBM3)")

    def start(args: argparse.Namespace, stop: threading.Event) -> None:
        if Path(args.devices_dir).resolve().is_relative_to("/dev"):
            ap.error("--devices-dir must not be in /dev: the stand-ins would look like real devices to the host")
        FakeGpus(args, stop).run()

    run(ap, start)

if __name__ == "__main__":
    main()
