"""Identity transfer of the classic swap, by an independent recognizer (MobileFaceNet), per face.

    python benchmarks/classic_identity.py [--variants] [--json]

The same as ``kiosk bench --identity``; ``--variants`` also runs the affine and auto keypoint fits
and the box mask beside the default (similarity fit, face mask), side by side on the same faces.
Needs ../shared/models/mobilefacenet_128_foamliu.onnx and the insightface package (t1.jpg).
"""

from __future__ import annotations

from kiosk.tools.identity import main

if __name__ == "__main__":
    raise SystemExit(main())
