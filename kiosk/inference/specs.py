"""Model facts in one typed place: what each role's ONNX file is, where it comes from, what it expects.

A :class:`ModelSpec` is frozen data: id, role, default file, download URLs, SHA-256 (with where that
hash was published), licence, input/output contract, colour order, mean/std and alignment
template. :func:`check_signature` compares a spec with a live ONNX Runtime session and raises
:class:`~kiosk.inference.errors.ModelSignatureError` naming the file and both values.

Hashes are the ones other public projects record for the same upstream files; ``sha256_source``
says where each one was read. A spec with ``sha256=None`` has no published hash we could find and
is reported as "unverified", never as verified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kiosk.inference.errors import ModelSignatureError

#: ``mesh`` is the classic swap's dense face mesh: bundled in the package, not a file a config role names.
Role = Literal["detector", "embedder", "swapper", "enhancer", "parser", "mesh"]
Family = Literal[
    "scrfd",
    "yunet",
    "retinaface",
    "arcface",
    "inswapper",
    "classic",
    "gfpgan",
    "gpen",
    "bisenet",
    "face_mesh",
]
ColourOrder = Literal["RGB", "BGR"]
Template = Literal["arcface_112", "arcface_128", "ffhq_512"]

#: Every role a config can name a file for. ``parser`` is optional: only with ``mask.occlusion``.
ROLES: tuple[Role, ...] = ("detector", "embedder", "swapper", "enhancer", "parser")

#: ONNX Runtime's type strings for the element types we accept.
ORT_DTYPES = {"float32": "tensor(float)", "float16": "tensor(float16)"}


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output. ``name=None`` accepts any name; a ``None`` dim accepts any size.

    ``batch_optional``: a leading batch axis of size 1 may be present or absent (SCRFD exports
    come as ``[N, k]`` or ``[1, N, k]``)."""

    name: str | None
    shape: tuple[int | None, ...]
    dtypes: tuple[str, ...] = ("float32",)
    batch_optional: bool = False

    def describe(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name or '*'}[{dims}] {'|'.join(self.dtypes)}"


@dataclass(frozen=True)
class ModelSpec:
    """Everything the code needs to know about one model file."""

    id: str
    role: Role
    family: Family
    file: str
    title: str
    licence: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    colour: ColourOrder = "RGB"
    #: Pixel normalisation: (x - mean) / std on 0..255 values.
    mean: float = 0.0
    std: float = 1.0
    #: Per-channel normalisation ``(x - channel_mean[c]) / channel_std[c]`` on 0..255 values, in the
    #: input's channel order (override ``mean`` / ``std``): RetinaFace's BGR means, ImageNet's RGB.
    channel_mean: tuple[float, float, float] | None = None
    channel_std: tuple[float, float, float] | None = None
    template: Template | None = None
    crop_size_px: int | None = None
    urls: tuple[str, ...] = ()
    sha256: str | None = None
    #: Other published exports of the same weights that are accepted as verified.
    also_sha256: tuple[str, ...] = ()
    sha256_source: str = ""
    size_bytes: int | None = None
    #: Where this exact file was taken from (repository @ commit : path), when it is not a release.
    source: str = ""
    notes: str = ""
    #: Other file names the same model is published under (matched like ``file``).
    aliases: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def known_hashes(self) -> tuple[str, ...]:
        return ((self.sha256,) if self.sha256 else ()) + self.also_sha256

    @property
    def non_commercial(self) -> bool:
        """The weights themselves are for non-commercial use only (InsightFace's, GPEN's): the
        licence's first clause says so. A caveat after it (BiSeNet's MIT weights were trained on
        a research data set) does not make the weights non-commercial."""
        return "non-commercial" in self.licence.split(";")[0].lower()


_INSIGHTFACE_LICENCE = "InsightFace pretrained models: non-commercial research use only"
_VISOMASTER = (
    "visomaster/VisoMaster @ 017af1a117b7485f7191d0b8237d8f0a8665f05f, app/processors/models_data.py "
    "(models_list: url + hash of the same file)"
)
_VISOMASTER_ASSETS = "https://github.com/visomaster/visomaster-assets/releases/download/v1.0.0/"
_HF_BUFFALO_L = "https://huggingface.co/public-data/insightface/resolve/main/models/buffalo_l/"


def _scrfd_outputs() -> tuple[TensorSpec, ...]:
    # 9 outputs: scores s8,s16,s32 [N,1]; boxes [N,4]; keypoints [N,10]. Names differ per export.
    widths = (1, 1, 1, 4, 4, 4, 10, 10, 10)
    return tuple(TensorSpec(None, (None, w), batch_optional=True) for w in widths)


def _yunet_outputs() -> tuple[TensorSpec, ...]:
    names = [f"{k}_{s}" for k in ("cls", "obj", "bbox", "kps") for s in (8, 16, 32)]
    widths = {"cls": 1, "obj": 1, "bbox": 4, "kps": 10}
    return tuple(TensorSpec(n, (1, None, widths[n.split("_")[0]])) for n in names)


def _retinaface_outputs() -> tuple[TensorSpec, ...]:
    # biubug6/Pytorch_Retinaface exports: loc [1,N,4], conf [1,N,2] (softmaxed), landmarks [1,N,10].
    return tuple(TensorSpec(None, (None, w), batch_optional=True) for w in (4, 2, 10))


_SCRFD_INPUT = (TensorSpec("input.1", (1, 3, None, None)),)

DET_10G = ModelSpec(
    id="det_10g",
    role="detector",
    family="scrfd",
    file="det_10g.onnx",
    title="SCRFD-10G (insightface buffalo_l detector)",
    licence=_INSIGHTFACE_LICENCE,
    inputs=_SCRFD_INPUT,
    outputs=_scrfd_outputs(),
    mean=127.5,
    std=128.0,
    urls=(_HF_BUFFALO_L + "det_10g.onnx", _VISOMASTER_ASSETS + "det_10g.onnx"),
    sha256="5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91",
    sha256_source=_VISOMASTER
    + "; the same value is recorded by several projects as det_10g.onnx of insightface v0.7 buffalo_l.zip",
    size_bytes=16923827,
    notes="Member of https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip; "
    "output names 448,471,494 / 451,474,497 / 454,477,500 as recorded by projects that use it",
)

DET_500M = ModelSpec(
    id="det_500m",
    role="detector",
    family="scrfd",
    file="det_500m.onnx",
    title="SCRFD-500M (insightface buffalo_s/buffalo_sc detector)",
    licence=_INSIGHTFACE_LICENCE,
    inputs=_SCRFD_INPUT,
    outputs=_scrfd_outputs(),
    mean=127.5,
    std=128.0,
    sha256="5e4447f50245bbd7966bd6c0fa52938c61474a04ec7def48753668a9d8b4ea3a",
    sha256_source="the file committed at yukkki7/FaceAnalysisApp @ d4126572 models/scrfd_500m.onnx; "
    "other projects record the same hash for buffalo_sc/det_500m.onnx of insightface v0.7",
    size_bytes=2524817,
    notes="Member of insightface v0.7 buffalo_sc.zip; no single-file URL is pinned here",
)

DET_2_5G = ModelSpec(
    id="det_2.5g",
    role="detector",
    family="scrfd",
    file="det_2.5g.onnx",
    title="SCRFD-2.5G (insightface buffalo_m detector)",
    licence=_INSIGHTFACE_LICENCE,
    inputs=_SCRFD_INPUT,
    outputs=_scrfd_outputs(),
    mean=127.5,
    std=128.0,
    sha256="041f73f47371333d1d17a6fee6c8ab4e6aecabefe398ff32cca4e2d5eaee0af9",
    sha256_source="the file committed at yukkki7/FaceAnalysisApp @ d4126572 models/scrfd_2.5g.onnx; "
    "other projects record the same hash for buffalo_m/det_2.5g.onnx of insightface v0.7",
    size_bytes=3292009,
    notes="Member of insightface v0.7 buffalo_m.zip; no single-file URL is pinned here",
)

YUNET_2023MAR = ModelSpec(
    id="yunet_2023mar",
    role="detector",
    family="yunet",
    file="face_detection_yunet_2023mar.onnx",
    title="YuNet 2023mar (OpenCV Zoo)",
    licence="MIT (OpenCV Zoo)",
    inputs=(TensorSpec("input", (1, 3, None, None)),),
    outputs=_yunet_outputs(),
    colour="BGR",
    mean=0.0,
    std=1.0,
    urls=(
        "https://github.com/opencv/opencv_zoo/raw/main/models/face_detection_yunet/"
        "face_detection_yunet_2023mar.onnx",
    ),
    sha256="8f2383e4dd3cfbb4553ea8718107fc0423210dc964f9f4280604804ed2552fa4",
    sha256_source="the file committed at ShiqiYu/libfacedetection.train @ 0047ac24 onnx/yunet_s_640_640.onnx; "
    "other projects record the same hash for opencv_zoo face_detection_yunet_2023mar.onnx",
    size_bytes=232589,
    notes="Fixed 640x640 input: use processing.det_size 640",
)

YUNET_2026MAY = ModelSpec(
    id="yunet_2026may",
    role="detector",
    family="yunet",
    file="face_detection_yunet_2026may.onnx",
    title="YuNet 2026may (OpenCV Zoo, dynamic input)",
    licence="MIT (OpenCV Zoo)",
    inputs=(TensorSpec("input", (1, 3, None, None)),),
    outputs=_yunet_outputs(),
    colour="BGR",
    mean=0.0,
    std=1.0,
    sha256="ebafce4e3c118d6554634be5c27ab333b4c047a9a8c3faf1d7cf93101c22f0f0",
    sha256_source="the file committed at RuDr8A/RealTime-PPE-Compliance @ d876a822; "
    "other projects record the same hash for opencv_zoo face_detection_yunet_2026may.onnx",
    size_bytes=229738,
)

_RETINAFACE_COMMON: dict[str, Any] = dict(
    role="detector",
    family="retinaface",
    outputs=_retinaface_outputs(),
    colour="BGR",
    mean=0.0,
    std=1.0,
    channel_mean=(104.0, 117.0, 123.0),
    extra={
        "steps": (8, 16, 32),
        "min_sizes": ((16, 32), (64, 128), (256, 512)),
        "variances": (0.1, 0.2),
    },
)

RETINAFACE_MNET025 = ModelSpec(
    id="retinaface_mnet025",
    file="retinaface_mnet025_640.onnx",
    title="RetinaFace MobileNet-0.25 (biubug6/Pytorch_Retinaface weights, fixed 640x640 export)",
    licence="MIT (biubug6/Pytorch_Retinaface weights); the repo of the ONNX export has no licence file",
    inputs=(TensorSpec("input0", (1, 3, None, None)),),
    urls=(
        "https://github.com/diandianti/photo_analyze/raw/2715cee6d1f39fc63b431a4fa14b0fc4f8334309/"
        "models/FaceDetector.onnx",
    ),
    sha256="f8cce06cdfa5d2a07a8378c8cff4c4f33f0b00a3f24d9ef53042ff591a881eb7",
    sha256_source="computed from the file at the source commit (diandianti/photo_analyze @ 2715cee6)",
    size_bytes=1709521,
    source="diandianti/photo_analyze @ 2715cee6d1f39fc63b431a4fa14b0fc4f8334309 : models/FaceDetector.onnx",
    notes="Fixed 640x640 input: tracking regions are letterboxed into it; outputs output0 (loc), "
    "572 (conf), 571 (landmarks)",
    **_RETINAFACE_COMMON,
)

#: The contract of any biubug6/Pytorch_Retinaface export (mobilenet0.25 or ResNet-50): same three
#: outputs, priors, variances and BGR mean; used for a RetinaFace file whose name we do not know.
RETINAFACE = ModelSpec(
    id="retinaface",
    file="retinaface.onnx",
    title="RetinaFace (biubug6/Pytorch_Retinaface export: MobileNet-0.25 or ResNet-50)",
    licence="MIT (biubug6/Pytorch_Retinaface code and weights)",
    inputs=(TensorSpec(None, (1, 3, None, None)),),
    **_RETINAFACE_COMMON,
)

#: The licence of the kiosk's own code, which is all the classic swapper is.
KIOSK_LICENCE = "MIT (faceswap-kiosk's own code, no model weights)"

#: ``models.swapper: classic``: no file, no weights (:mod:`kiosk.inference.classic`). Its "input"
#: is the visitor's face aligned to the same 128 template as InSwapper's; its "source" is the
#: library photo's own face aligned alike.
CLASSIC_SWAPPER = ModelSpec(
    id="classic",
    role="swapper",
    family="classic",
    file="classic",
    title="classic swap (the library photo's own face, posed by the five keypoints, moved by the face mesh; built in)",
    licence=KIOSK_LICENCE,
    inputs=(),
    outputs=(),
    template="arcface_128",
    crop_size_px=128,
    notes="Reserved name: nothing to fetch or verify; needs no embedder",
)

#: The classic swap's dense face mesh, bundled (provenance: ``kiosk/data/models/PROVENANCE.md``).
FACE_MESH = ModelSpec(
    id="face_mesh_468",
    role="mesh",
    family="face_mesh",
    file="face_mesh_468.onnx",
    title="MediaPipe Face Mesh, 468 points (face_landmark.tflite of mediapipe 0.10.14, converted to ONNX)",
    licence="Apache-2.0 (MediaPipe)",
    inputs=(TensorSpec("input", (1, 3, 192, 192)),),
    outputs=(TensorSpec("landmarks", (1, 1404)), TensorSpec("face_flag", (1, 1))),
    std=255.0,
    crop_size_px=192,
    sha256="9245adace4fe5ea0c538c35ef2850b82929cda36737b57b7ac8966a02de38664",
    sha256_source="the output of scripts/convert_face_mesh.py (reproducible: the same bytes on every run) "
    "from mediapipe-0.10.14 manylinux cp311 wheel sha256 a807328339e7356f..., tflite sha256 1055cb9d4a9ca8b8...",
    size_bytes=2429454,
    notes="Bundled: package:data/models/face_mesh_468.onnx; not fetched",
)

#: Where the bundled YuNet lives inside the package (``kiosk/data/models/``), its config value.
BUNDLED_DETECTOR = "package:data/models/face_detection_yunet_2023mar.onnx"

W600K_R50 = ModelSpec(
    id="w600k_r50",
    role="embedder",
    family="arcface",
    file="w600k_r50.onnx",
    title="ArcFace ResNet-50 WebFace600K (insightface buffalo_l recognizer)",
    licence=_INSIGHTFACE_LICENCE,
    inputs=(TensorSpec("input.1", (None, 3, 112, 112)),),
    outputs=(TensorSpec("683", (None, 512)),),
    mean=127.5,
    std=127.5,
    template="arcface_112",
    crop_size_px=112,
    urls=(_HF_BUFFALO_L + "w600k_r50.onnx", _VISOMASTER_ASSETS + "w600k_r50.onnx"),
    sha256="4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43",
    sha256_source=_VISOMASTER
    + "; the same value is recorded by several projects as w600k_r50.onnx of insightface v0.7 buffalo_l.zip",
    size_bytes=174383860,
    notes="Member of insightface v0.7 buffalo_l.zip",
)

_INSWAPPER_IO = dict(
    inputs=(
        TensorSpec("target", (1, 3, 128, 128), ("float32", "float16")),
        TensorSpec("source", (1, 512), ("float32", "float16")),
    ),
    outputs=(TensorSpec("output", (1, 3, 128, 128), ("float32", "float16")),),
)

INSWAPPER_128 = ModelSpec(
    id="inswapper_128",
    role="swapper",
    family="inswapper",
    file="inswapper_128.onnx",
    title="InSwapper 128 (insightface)",
    licence=_INSIGHTFACE_LICENCE,
    mean=0.0,
    std=255.0,
    template="arcface_128",
    crop_size_px=128,
    urls=(
        "https://huggingface.co/ezioruan/inswapper_128.onnx/resolve/main/inswapper_128.onnx",
        "https://github.com/facefusion/facefusion-assets/releases/download/models/inswapper_128.onnx",
    ),
    sha256="e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af",
    sha256_source=(
        "recorded for exactly these URLs in the public source of several independent projects "
        "(found by code search, e.g. download scripts pinning huggingface.co/ezioruan/inswapper_128.onnx "
        "revision 6ffdf0e83c5996cc425e77b59913fc48d79441be); not published by insightface itself"
    ),
    size_bytes=554253681,
    notes="emap (512x512) is the graph's last initializer",
    **_INSWAPPER_IO,  # type: ignore[arg-type]
)

INSWAPPER_128_FP16 = ModelSpec(
    id="inswapper_128_fp16",
    role="swapper",
    family="inswapper",
    file="inswapper_128_fp16.onnx",
    title="InSwapper 128, fp16 weights",
    licence=_INSIGHTFACE_LICENCE,
    mean=0.0,
    std=255.0,
    template="arcface_128",
    crop_size_px=128,
    urls=(
        _VISOMASTER_ASSETS + "inswapper_128.fp16.onnx",
        "https://huggingface.co/hacksider/deep-live-cam/resolve/main/inswapper_128_fp16.onnx",
    ),
    sha256="6d51a9278a1f650cffefc18ba53f38bf2769bf4bbff89267822cf72945f8a38b",
    sha256_source=_VISOMASTER + " (file inswapper_128.fp16.onnx); the same value is recorded for the "
    "hacksider/deep-live-cam copy by other projects",
    size_bytes=277680638,
    **_INSWAPPER_IO,  # type: ignore[arg-type]
)

GFPGAN_1_4 = ModelSpec(
    id="gfpgan_1.4",
    role="enhancer",
    family="gfpgan",
    file="GFPGANv1.4.onnx",
    title="GFPGAN v1.4 (TencentARC weights, third-party ONNX export)",
    licence="Apache-2.0 (TencentARC/GFPGAN code and weights); StyleGAN2 parts carry NVIDIA terms",
    inputs=(TensorSpec("input", (1, 3, 512, 512)),),
    outputs=(TensorSpec(None, (1, 3, 512, 512)),),
    mean=127.5,
    std=127.5,
    template="ffhq_512",
    crop_size_px=512,
    urls=(_VISOMASTER_ASSETS + "GFPGANv1.4.onnx",),
    sha256="6548e54cbcf248af385248f0c1193b359c37a0f98b836282b09cf48af4fd2b73",
    also_sha256=("cd7311b8d9e13cdb1e208b12363182da58c7bf45e26d1aa67bbeac4751aae92e",),
    sha256_source=_VISOMASTER + "; the alternative hash is the widely mirrored 340,256,686-byte export "
    "(huggingface.co/neurobytemind/GFPGANv1.4.onnx, recorded by several projects)",
    notes="Output name differs between exports; output is RGB in [-1, 1]",
)

_FACEFUSION_ASSETS = "https://github.com/facefusion/facefusion-assets/releases/download/"
_HF_FACEFUSION = "https://huggingface.co/facefusion/"
_GPEN_LICENCE = (
    "NON-COMMERCIAL (yangxy/GPEN weights carry no licence; FaceFusion and the ONNX mirrors list them "
    "as non-commercial use only)"
)


def _gpen(size_px: int, **kw: Any) -> ModelSpec:
    return ModelSpec(
        role="enhancer",
        family="gpen",
        title=f"GPEN-BFR-{size_px} (yangxy/GPEN blind face restoration, ONNX export)",
        licence=_GPEN_LICENCE,
        inputs=(TensorSpec("input", (1, 3, size_px, size_px)),),
        outputs=(TensorSpec(None, (1, 3, size_px, size_px)),),
        mean=127.5,
        std=127.5,
        template="ffhq_512",
        crop_size_px=size_px,
        **kw,
    )


GPEN_BFR_256 = _gpen(
    256,
    id="gpen_bfr_256",
    file="GPEN-BFR-256.onnx",
    aliases=("gpen_bfr_256.onnx",),
    urls=(
        "https://huggingface.co/netrunner-exe/Face-Upscalers-onnx/resolve/main/GPEN-BFR-256.onnx",
        _FACEFUSION_ASSETS + "models-3.0.0/gpen_bfr_256.onnx",
        _HF_FACEFUSION + "models-3.0.0/resolve/main/gpen_bfr_256.onnx",
    ),
    sha256="aa5bd3ab238640a378c59e4a560f7a7150627944cf2129e6311ae4720e833271",
    also_sha256=("bad8bf0426873828df2dbf4e3b3d9ababba9da7965b8b72426569486f7ae5c25",),
    sha256_source="not published upstream (GPEN publishes .pth files, FaceFusion CRC32 .hash files); "
    "recorded in the public source of several projects: aa5bd3ab... for the 75,715,262-byte "
    "GPEN-BFR-256.onnx (netrunner-exe/Face-Upscalers-onnx, Rope and VisoMaster assets), "
    "bad8bf04... for FaceFusion's 75,792,988-byte gpen_bfr_256.onnx (models-3.0.0)",
    size_bytes=75715262,
    notes="Input 'input' [1,3,256,256] RGB (x/255-0.5)/0.5, output [1,3,256,256] in [-1,1] (as Rope and "
    "FaceFusion run it). Aligned to the FFHQ template scaled to 256 as Rope does; FaceFusion uses "
    "its arcface_128 template for this model and GPEN's own code a padded ArcFace template "
    "(all within about 15% in face scale)",
)

GPEN_BFR_512 = _gpen(
    512,
    id="gpen_bfr_512",
    file="GPEN-BFR-512.onnx",
    aliases=("gpen_bfr_512.onnx",),
    urls=(
        "https://huggingface.co/netrunner-exe/Face-Upscalers-onnx/resolve/main/GPEN-BFR-512.onnx",
        _FACEFUSION_ASSETS + "models-3.0.0/gpen_bfr_512.onnx",
        _HF_FACEFUSION + "models-3.0.0/resolve/main/gpen_bfr_512.onnx",
    ),
    sha256="0960f836488735444d508b588e44fb5dfd19c68fde9163ad7878aa24d1d5115e",
    also_sha256=("d5f066b9068a8b74217f9712e28e875a6144629b108a6f7355acbdb3a2832c54",),
    sha256_source="not published upstream; recorded in the public source of several projects: "
    "0960f836... for the 284,250,449-byte GPEN-BFR-512.onnx (netrunner-exe/Face-Upscalers-onnx, "
    "Rope assets), d5f066b9... for FaceFusion's 284,340,240-byte gpen_bfr_512.onnx (models-3.0.0)",
    size_bytes=284250449,
    notes="Input 'input' [1,3,512,512] RGB (x/255-0.5)/0.5, output in [-1,1]; FFHQ 512 template "
    "(as FaceFusion and Rope)",
)

#: ImageNet normalisation of the BiSeNet parsers (RGB, on 0..1 values).
#: ImageNet's normalisation (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225) of x/255, as 0..255 values (RGB).
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)
_BISENET_LICENCE = (
    "MIT (yakhyo/face-parsing code and weights); trained on CelebAMask-HQ, whose images are "
    "licensed for non-commercial research"
)


def _bisenet(**kw: Any) -> ModelSpec:
    # yakhyo's export: input 'input' [batch,3,512,512]; the model returns its main head and two
    # auxiliary heads, all upsampled to 512: outputs 'output', '0', '1' [batch,19,512,512].
    logits = (1, 19, 512, 512)
    return ModelSpec(
        role="parser",
        family="bisenet",
        licence=_BISENET_LICENCE,
        inputs=(TensorSpec("input", (1, 3, 512, 512)),),
        outputs=(TensorSpec("output", logits), TensorSpec(None, logits), TensorSpec(None, logits)),
        channel_mean=IMAGENET_MEAN,
        channel_std=IMAGENET_STD,
        template="arcface_128",
        crop_size_px=512,
        **kw,
    )


BISENET_RESNET_34 = _bisenet(
    id="bisenet_resnet_34",
    file="bisenet_resnet_34.onnx",
    title="BiSeNet ResNet-34 face parser (19 CelebAMask-HQ classes, as used by FaceFusion)",
    urls=(
        _FACEFUSION_ASSETS + "models-3.0.0/bisenet_resnet_34.onnx",
        _HF_FACEFUSION + "models-3.0.0/resolve/main/bisenet_resnet_34.onnx",
    ),
    sha256="4a0b8c958a3c938913bd06a8365dbb3c8761afba6ecbf0d14b3b1f77eb230c96",
    sha256_source="not published by FaceFusion (its bisenet_resnet_34.hash is a CRC32, 35d17a50) nor by "
    "yakhyo/face-parsing; recorded with size 93,632,546 for facefusion models-3.0.0 "
    "bisenet_resnet_34.onnx in the public source of several independent projects",
    size_bytes=93632546,
    notes="FaceFusion's face_parser (facefusion/face_masker.py); ~2x the compute of ResNet-18",
)

BISENET_RESNET_18 = _bisenet(
    id="bisenet_resnet_18",
    file="bisenet_resnet_18.onnx",
    title="BiSeNet ResNet-18 face parser (19 CelebAMask-HQ classes, as used by FaceFusion)",
    urls=(
        _FACEFUSION_ASSETS + "models-3.1.0/bisenet_resnet_18.onnx",
        _HF_FACEFUSION + "models-3.1.0/resolve/main/bisenet_resnet_18.onnx",
    ),
    sha256="2218b6183c26ca5c83303232d682a536c670c13ea9695f716c777d1f244eefe9",
    sha256_source="not published by FaceFusion (CRC32 .hash files only) nor by yakhyo/face-parsing; "
    "recorded with size 53,205,356 for facefusion models-3.1.0 bisenet_resnet_18.onnx in the public "
    "source of several independent projects (one of which also records its outputs output, 0, 1)",
    size_bytes=53205356,
)

#: Every model the kiosk knows by file name.
KNOWN_MODELS: tuple[ModelSpec, ...] = (
    DET_10G,
    DET_500M,
    DET_2_5G,
    YUNET_2023MAR,
    YUNET_2026MAY,
    RETINAFACE_MNET025,
    W600K_R50,
    INSWAPPER_128,
    INSWAPPER_128_FP16,
    GFPGAN_1_4,
    GPEN_BFR_256,
    GPEN_BFR_512,
    BISENET_RESNET_34,
    BISENET_RESNET_18,
)

#: Spec used for a file of a role whose name we do not know (same contract, no hash).
_GENERIC: dict[Role, ModelSpec] = {
    "detector": DET_10G,
    "embedder": W600K_R50,
    "swapper": INSWAPPER_128,
    "enhancer": GFPGAN_1_4,
    "parser": BISENET_RESNET_34,
}


def detector_family_of(path: str | Path) -> Family:
    """Which detector family an unknown file is, from its name, else from its graph's outputs:
    YuNet (named ``cls_8``... outputs), RetinaFace (three outputs of widths 4, 2, 10), else SCRFD
    (whose contract then reports what is wrong)."""
    p = Path(path)
    name = p.name.lower()
    if "yunet" in name:
        return "yunet"
    if "retinaface" in name:
        return "retinaface"
    try:
        import onnx

        graph = onnx.load(str(p), load_external_data=False).graph
    except Exception:  # missing or unreadable: the session factory says so with the fix
        return "scrfd"
    outputs = [o.name for o in graph.output]
    if "cls_8" in outputs and "kps_32" in outputs:
        return "yunet"
    if len(outputs) == 3:
        widths = []
        for o in graph.output:
            dims = o.type.tensor_type.shape.dim
            widths.append(dims[-1].dim_value if dims else 0)
        if widths == [4, 2, 10]:
            return "retinaface"
    return "scrfd"


def known_spec(role: Role, path: str | Path) -> ModelSpec | None:
    """The spec of a known file in ``role`` by its name (no file is read), else None."""
    name = Path(path).name
    for spec in KNOWN_MODELS:
        if spec.role == role and (spec.file == name or name in spec.aliases):
            return spec
    return None


def spec_for_file(role: Role, path: str | Path) -> ModelSpec:
    """The spec of ``path`` in ``role``: a known file by name, else the role's generic contract (for
    a detector, the family :func:`detector_family_of` finds)."""
    name = Path(path).name
    for spec in KNOWN_MODELS:
        if spec.role == role and (spec.file == name or name in spec.aliases):
            return spec
    base = _GENERIC[role]
    if role == "detector":
        base = {"yunet": YUNET_2026MAY, "retinaface": RETINAFACE}.get(detector_family_of(path), base)
    # Unknown file: keep the contract, drop the identity (no hash, no URL).
    from dataclasses import replace

    io_names_free = tuple(TensorSpec(None, t.shape, t.dtypes, t.batch_optional) for t in base.inputs)
    out_free = tuple(TensorSpec(None, t.shape, t.dtypes, t.batch_optional) for t in base.outputs)
    if base.family == "yunet":  # YuNet outputs are found by name
        out_free = base.outputs
    return replace(
        base,
        id=Path(name).stem,
        file=name,
        title=f"{name} (unknown file, {base.family} contract)",
        inputs=io_names_free,
        outputs=out_free,
        urls=(),
        sha256=None,
        also_sha256=(),
        sha256_source="unknown file: no published hash",
        size_bytes=None,
        source="",
        aliases=(),
        licence="unknown (check where the file came from)",
    )


def _shape_ok(want: TensorSpec, got: Sequence[Any]) -> bool:
    dims = list(got)
    if want.batch_optional and len(dims) == len(want.shape) + 1:
        if isinstance(dims[0], int) and dims[0] != 1:
            return False
        dims = dims[1:]
    if len(dims) != len(want.shape):
        return False
    for w, g in zip(want.shape, dims, strict=True):
        # A symbolic ("?", "height", None) dim in the graph matches anything.
        if w is not None and isinstance(g, int) and g != w:
            return False
    return True


def _describe_node(node: Any) -> str:
    dims = ",".join("?" if not isinstance(d, int) else str(d) for d in node.shape)
    dtype = {v: k for k, v in ORT_DTYPES.items()}.get(node.type, node.type)
    return f"{node.name}[{dims}] {dtype}"


def check_signature(spec: ModelSpec, session: Any, path: str | Path) -> None:
    """Raise :class:`ModelSignatureError` if ``session``'s inputs/outputs break ``spec``'s contract."""

    def fail(what: str, want: str, got: str) -> None:
        raise ModelSignatureError(
            f"{path}: {what} does not match the {spec.role} contract ({spec.id}): "
            f"expected {want}, got {got} — is this the right file for models.{spec.role}?"
        )

    for kind, want_list, got_list in (
        ("inputs", spec.inputs, session.get_inputs()),
        ("outputs", spec.outputs, session.get_outputs()),
    ):
        want_all = ", ".join(t.describe() for t in want_list)
        got_all = ", ".join(_describe_node(n) for n in got_list)
        if len(got_list) != len(want_list):
            fail(f"number of {kind}", f"{len(want_list)} ({want_all})", f"{len(got_list)} ({got_all})")
        if spec.family == "yunet" and kind == "outputs":
            by_name = {n.name: n for n in got_list}
            pairs = [(w, by_name.get(w.name or "")) for w in want_list]
        else:
            pairs = list(zip(want_list, got_list, strict=True))
        for want, got in pairs:
            if got is None:
                fail(f"{kind}", want_all, got_all)
                continue
            if want.name is not None and got.name != want.name:
                fail(f"{kind[:-1]} name", want.describe(), _describe_node(got))
            if got.type not in {ORT_DTYPES[d] for d in want.dtypes}:
                fail(f"{kind[:-1]} type", want.describe(), _describe_node(got))
            if not _shape_ok(want, got.shape):
                fail(f"{kind[:-1]} shape", want.describe(), _describe_node(got))
