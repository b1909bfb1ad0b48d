"""Every pinned version and checksum of the overlay, in one place."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass

from packaging.version import Version

from overlay.errors import TargetError

EXECUTORCH_VERSION = Version("1.2.0")
EXECUTORCH_GIT_TAG = "v1.2.0"
UPSTREAM_REPO = "pytorch/executorch"

# Lowering the reference models needs exactly these; torch 2.13 breaks executorch 1.2.0
# (aten.transpose.Dimname and its compiled libraries).
TORCH_VERSION = "2.11.0"
TORCHAO_VERSION = "0.18.0"
TOSA_TOOLS_VERSION = "2026.2.1"
# VGF: ai-ml-sdk-model-converter (the `model_converter` binary). 0.8.0 and 0.10.0 reject
# the TOSA files tosa-tools 2026.2.1 writes ("newer SerLib version"); 0.9.0 and 0.11.0 work.
MODEL_CONVERTER_VERSION = "0.11.0"

# Repository paths map onto the wheel under this package directory:
# backends/arm/X in pytorch/executorch is executorch/backends/arm/X in the wheel.
PACKAGE_DIR = "executorch"


@dataclass(frozen=True)
class WheelPin:
    """One pinned executorch wheel file."""

    filename: str
    sha256: str  # empty when not yet known (the version matrix records it on first fetch)
    python: str  # "3.11"
    platform: str  # pip --platform value

    @property
    def version(self) -> str:
        """Return the executorch version in the file name."""
        return self.filename.split("-")[1]

    @property
    def abi(self) -> str:
        """Return the CPython ABI tag, e.g. ``cp311``."""
        return "cp" + self.python.replace(".", "")


# sha256 of the wheel files as published for executorch 1.2.0.
WHEELS: tuple[WheelPin, ...] = (
    WheelPin(
        "executorch-1.2.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "746f6081e44c00f073935b452d4810ab92830170b5f2b6804a3559d27346ee41",
        "3.11",
        "manylinux_2_28_x86_64",
    ),
    WheelPin(
        "executorch-1.2.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "44090bb8361de77ae551efae045ec577abfb9a4b7f42365627768d2e5735f542",
        "3.12",
        "manylinux_2_28_x86_64",
    ),
    WheelPin(
        "executorch-1.2.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        "aca04140eca6d7bc07fe52a0c93d7acf70f5a350dde7ec05680a9f43f3ed55f4",
        "3.11",
        "manylinux_2_28_aarch64",
    ),
    WheelPin(
        "executorch-1.2.0-cp312-cp312-manylinux_2_28_aarch64.whl",
        "ebcf508bafed6a7eb4f186459ccc921aabd7b1f6c13a2045ed16654075b58a36",
        "3.12",
        "manylinux_2_28_aarch64",
    ),
    WheelPin(
        "executorch-1.2.0-cp311-cp311-macosx_12_0_arm64.whl",
        "239b25d8060329066e6a88e2e4b0edde0bf4b637e8fae6f71ff25e522462bb06",
        "3.11",
        "macosx_12_0_arm64",
    ),
)

# sha256 of every pristine file the series touches, at its repository path. Each equals
# the hash in the 1.2.0 wheels' RECORD and the blob at tag v1.2.0 (checked by the tests).
PRISTINE_SHA256: dict[str, str] = {
    "backends/arm/_passes/fold_qdq_with_annotated_qparams_pass.py": (
        "ce057393b329c8d3b0e0d9600aa04082bce6d467e6a2df3cc5195d66a00bf7bd"
    ),
    "backends/arm/quantizer/quantization_annotator.py": (
        "21e8e7495c067e25ddeac051c3f55102916b2fbcfde21752387e7eb9d14d6b7e"
    ),
    "backends/arm/_passes/rewrite_conv_pass.py": (
        "4953b934500597d895245f75efe4acb6a08c079038ebdcbf985fc7da00728624"
    ),
    "backends/arm/_passes/to_tosa_memory_format_pass.py": (
        "d8b8f6c33f7fee60b4f332fd08d0046de8adc5bd345de9510d41380198ccc646"
    ),
}


def runtime_requirements() -> list[str]:
    """Return the pip requirements that sit beside executorch in a ready venv."""
    return [
        f"torch=={TORCH_VERSION}",
        f"torchao=={TORCHAO_VERSION}",
        f"tosa-tools=={TOSA_TOOLS_VERSION}",
        f"ai-ml-sdk-model-converter=={MODEL_CONVERTER_VERSION}",
    ]


def wheel_path(repo_path: str) -> str:
    """Map a repository path (``backends/arm/X``) to its path inside the wheel."""
    return f"{PACKAGE_DIR}/{repo_path}"


def module_name(repo_path: str) -> str:
    """Map a repository path to its dotted module name (``executorch.backends.arm...``)."""
    return wheel_path(repo_path).removesuffix(".py").replace("/", ".")


def host_wheel_pin() -> WheelPin:
    """Return the pinned wheel for this interpreter and machine."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    machine = platform.machine().lower()
    system = sys.platform
    for pin in WHEELS:
        if pin.python != python:
            continue
        if system.startswith("linux") and pin.platform.endswith("_" + machine):
            return pin
        if system == "darwin" and machine == "arm64" and pin.platform.endswith("arm64"):
            return pin
    known = ", ".join(p.filename for p in WHEELS)
    raise TargetError(
        "no pinned executorch wheel for this interpreter and machine",
        expected=f"one of: {known}",
        found=f"Python {python} on {system}/{machine}",
        hint="pass --wheel-tag or --wheel FILE, or add a WheelPin to overlay/pins.py",
    )


def wheel_pin_for(filename_or_tag: str) -> WheelPin:
    """Find a pinned wheel by file name or by ``cp311-manylinux_2_28_x86_64`` style tag."""
    for pin in WHEELS:
        if filename_or_tag in (pin.filename, f"{pin.abi}-{pin.platform}"):
            return pin
    raise TargetError(
        f"{filename_or_tag!r} is not a pinned executorch wheel",
        expected=", ".join(p.filename for p in WHEELS),
        found=filename_or_tag,
        hint="use one of the pinned wheels, or pin the new one in overlay/pins.py",
    )


# The version matrix (`python -m overlay matrix`) reads sources from one wheel per release;
# sha256 as published, recorded on first fetch. MATRIX_VERSIONS is the default selection.
MATRIX_VERSIONS: tuple[str, ...] = ("1.1.0", "1.2.0", "1.3.1", "1.4.1", "1.5.1")
_MX = "manylinux_2_28_x86_64"
MATRIX_WHEELS: tuple[WheelPin, ...] = tuple(
    WheelPin(f"executorch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl", sha256, "3.11", _MX)
    for version, sha256 in (
        ("1.1.0", "aaeadfec7715d228a33a35c4de4e80827ece20454e9932248b50ffd4b2f52c0c"),
        ("1.2.0", "746f6081e44c00f073935b452d4810ab92830170b5f2b6804a3559d27346ee41"),
        ("1.3.1", "ca69888e7281445c3fe830b259f5e80da4d7116d91fe8d4afb82c0f94ab77238"),
        ("1.4.0", "d9942c7d4b135308590eef4a30b22d8fa3aaf6235a9b304ac9209d90ada14e20"),
        ("1.4.1", "92624b57111109bb6e470c145fd0e73de66549b0fcb04cfca4e55ecd8bfe3007"),
        ("1.5.0", "970d9ec9fc7fb7e30ece5b942b16ddc84372353af94ebf69d94687153ac8ab67"),
        ("1.5.1", "274c28c2fe2b76acb03f9fa381537425c40e0098dcf886baf6d97a1a55ffe300"),
    )
)
