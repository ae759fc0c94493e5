"""Alignment: templates and the Umeyama similarity against scikit-image (what insightface uses)."""

from __future__ import annotations

import numpy as np
import pytest

from kiosk.inference.align import ARCFACE_112, FFHQ_512, align_matrix, arcface_template, estimate_similarity


def test_template_128_is_112_shifted_8px() -> None:
    t = arcface_template(128)
    np.testing.assert_allclose(t[:, 0], ARCFACE_112[:, 0] + 8.0, atol=1e-5)
    np.testing.assert_allclose(t[:, 1], ARCFACE_112[:, 1], atol=1e-5)
    np.testing.assert_allclose(arcface_template(224), ARCFACE_112 * 2, atol=1e-4)
    with pytest.raises(ValueError):
        arcface_template(100)


def test_similarity_recovers_known_transform() -> None:
    rng = np.random.default_rng(0)
    src = rng.uniform(0, 500, (5, 2))
    ang, s, t = 0.3, 1.7, np.array([12.0, -40.0])
    r = np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
    dst = s * src @ r.T + t
    m = estimate_similarity(src, dst)
    np.testing.assert_allclose(m[:, :2], s * r, atol=1e-9)
    np.testing.assert_allclose(m[:, 2], t, atol=1e-7)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_similarity_matches_skimage() -> None:
    skt = pytest.importorskip("skimage.transform")
    rng = np.random.default_rng(1)
    for _ in range(20):
        kps = (ARCFACE_112 * rng.uniform(0.5, 4)) + rng.uniform(0, 800, 2) + rng.normal(0, 3, (5, 2))
        tform = skt.SimilarityTransform()
        tform.estimate(kps.astype(np.float32), arcface_template(128))
        np.testing.assert_allclose(
            align_matrix(kps.astype(np.float32), "arcface_128", 128), tform.params[:2], rtol=1e-6, atol=1e-4
        )


def test_ffhq_template_scales() -> None:
    m = align_matrix(FFHQ_512 / 2, "ffhq_512", 256)
    np.testing.assert_allclose(m, [[1, 0, 0], [0, 1, 0]], atol=1e-5)
