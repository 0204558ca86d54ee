"""The parts of scripts/images that need no podman, no containerd and no network."""
import io
import json
import tarfile
from pathlib import Path

import pytest

BASE = "localhost/tightrope/sid-base:20260101"


def make_context(path: Path, dockerfile: str = "FROM x\nRUN true\n") -> Path:
    path.mkdir(parents=True)
    (path / "Dockerfile").write_text(dockerfile)
    (path / "entrypoint").write_text("#!/bin/sh\nexec true\n")
    return path


def test_the_key_is_the_same_for_the_same_files_in_another_folder(images, tmp_path):
    a = make_context(tmp_path / "a")
    b = make_context(tmp_path / "b")
    assert images.image_key(a, BASE) == images.image_key(b, BASE)


def test_the_key_changes_when_the_dockerfile_changes(images, tmp_path):
    context = make_context(tmp_path / "c")
    before = images.image_key(context, BASE)
    (context / "Dockerfile").write_text("FROM x\nRUN false\n")
    assert images.image_key(context, BASE) != before


def test_the_key_changes_when_a_file_is_added(images, tmp_path):
    context = make_context(tmp_path / "c")
    before = images.image_key(context, BASE)
    (context / "extra.conf").write_text("x\n")
    assert images.image_key(context, BASE) != before


def test_the_key_changes_when_a_file_becomes_executable(images, tmp_path):
    context = make_context(tmp_path / "c")
    before = images.image_key(context, BASE)
    (context / "entrypoint").chmod(0o755)
    assert images.image_key(context, BASE) != before


def test_the_key_changes_with_the_base(images, tmp_path):
    context = make_context(tmp_path / "c")
    assert images.image_key(context, BASE) != images.image_key(
        context, "localhost/tightrope/sid-base:20260202")


def test_an_image_comes_after_the_image_it_is_built_on(images):
    names = [i.name for i in images.select(["slurmd", "slurmctld", "pause"])]
    assert names == ["slurm-base", "slurmd", "slurmctld", "pause"]
    everything = [i.name for i in images.select([])]
    for image in images.select([]):
        if image.base in everything:
            assert everything.index(image.base) < everything.index(image.name)


def test_a_staged_slurm_image_context_holds_its_dockerfile(images, tmp_path):
    [_, slurmctld] = images.select(["slurmctld"])
    context = images.stage_context(slurmctld, tmp_path)
    assert (context / "Dockerfile").read_text().startswith("#")
    assert len(images.image_key(context, BASE)) == 16


def test_the_archive_is_named_after_the_image_and_its_key(images, tmp_path):
    [pause] = images.select(["pause"])
    path = images.archive_path(pause, "0123456789abcdef", tmp_path)
    assert path == tmp_path / "pause-0123456789abcdef.oci.tar"


def test_the_index_maps_every_reference_and_alias_to_its_archive(images, tmp_path):
    slurmd_archive = tmp_path / "slurmd-aaaa.oci.tar"
    pause_archive = tmp_path / "pause-bbbb.oci.tar"
    for p in (slurmd_archive, pause_archive):
        p.write_bytes(b"x")
    index = images.write_index(tmp_path, {"slurmd": slurmd_archive, "pause": pause_archive})
    assert json.loads(index.read_text()) == {
        "localhost/tightrope/pause:3.10": str(pause_archive),
        "localhost/tightrope/slurmd:26.05": str(slurmd_archive),
        "localhost/tightrope/slurmd:26.05-b": str(slurmd_archive),
    }


def test_the_index_keeps_earlier_entries_whose_archive_exists(images, tmp_path):
    kept = tmp_path / "pause-bbbb.oci.tar"
    kept.write_bytes(b"x")
    images.write_index(tmp_path, {"pause": kept, "slurmctld": tmp_path / "slurmctld-gone.oci.tar"})
    fresh = tmp_path / "slurmdbd-cccc.oci.tar"
    fresh.write_bytes(b"x")
    entries = images.read_index(images.write_index(tmp_path, {"slurmdbd": fresh}).parent)
    assert entries == {"localhost/tightrope/pause:3.10": str(kept),
                       "localhost/tightrope/slurmdbd:26.05": str(fresh)}


def test_every_image_has_a_dockerfile_and_a_localhost_reference(images):
    for image in images.IMAGES:
        assert (images.REPO / "images" / image.name / "Dockerfile").exists(), image.name
        assert image.ref.startswith("localhost/tightrope/"), image.ref


def test_an_unknown_image_name_is_refused(images):
    with pytest.raises(images.ImagesError, match="unknown image nope"):
        images.select(["slurmctld", "nope"])


def test_ctr_image_listing_is_parsed_into_reference_and_digest(images):
    text = (
        "REF                                TYPE                                    "
        "DIGEST            SIZE     PLATFORMS   LABELS\n"
        "localhost/tightrope/pause:3.10     application/vnd.oci.image.manifest.v1+json "
        "sha256:aaaa 340.0 KiB linux/amd64 io.cri-containerd.image=managed\n"
        "sha256:bbbb                        application/vnd.oci.image.manifest.v1+json "
        "sha256:aaaa 340.0 KiB linux/amd64 io.cri-containerd.image=managed\n")
    assert images.parse_ctr_images(text) == {"localhost/tightrope/pause:3.10": "sha256:aaaa",
                                             "sha256:bbbb": "sha256:aaaa"}


def test_the_manifest_digest_is_read_from_an_oci_archive(images, tmp_path):
    archive = tmp_path / "x.oci.tar"
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:cafe",
         "size": 1}]}).encode()
    with tarfile.open(archive, "w") as tar:
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert images.oci_archive_manifest(archive) == "sha256:cafe"


def test_a_tools_image_is_built_only_when_named(images):
    assert "keda" not in [i.name for i in images.select([])]
    assert [i.name for i in images.select(["keda"])] == ["keda"]
