"""Errors raised by the inference stages. Each message is one line that names the file and the fix."""

from __future__ import annotations


class ModelError(Exception):
    """A model file cannot be used. ``str(err)`` is a one-line message for the operator."""


class LicenceError(ModelError):
    """A model whose weights are non-commercial, named by a config that has not accepted that
    licence (``models.accept_noncommercial_licence``): never opened."""


class ModelMissingError(ModelError):
    """The model file does not exist."""


class ModelCorruptError(ModelError):
    """The model file exists but is not a loadable ONNX graph (truncated, wrong file, ...)."""


class ModelResourceError(ModelError):
    """The model is fine but the process hit a system limit opening it (file descriptors, memory):
    the message names the limit and how to raise it, never "delete the file"."""


class ModelSignatureError(ModelError):
    """The ONNX graph loads but its inputs/outputs do not match the role's contract."""


class ImageError(ValueError):
    """An image could not be read or has the wrong layout."""


class NoFaceError(ValueError):
    """No face was found where one is required (e.g. the source face image)."""
