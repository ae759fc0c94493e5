"""Identity transfer of the classic swap, by an independent recognizer (MobileFaceNet), per face.

    python benchmarks/classic_identity.py [--variants] [--json]

The same as ``kiosk bench --identity``; ``--variants`` also runs the 5-point swap (``models.mesh:
null``) with the similarity, affine and auto keypoint fits, and v2 with the box mask, beside the
default (v2: the face mesh, similarity fit, face mask), side by side on the same faces.
Needs ../shared/models/mobilefacenet_128_foamliu.onnx and the insightface package (t1.jpg).
"""

from __future__ import annotations

from kiosk.tools.identity import main

if __name__ == "__main__":
    raise SystemExit(main())
