"""The one way the kiosk compiles its numba kernels: cached on disk when it can be, in memory when not.

numba's ``cache=True`` writes each compiled kernel to its cache folder (``NUMBA_CACHE_DIR``, see
:func:`kiosk.paths.configure_numba_cache`). When that folder is full or not writable, numba
raises the write's ``OSError`` out of the kernel's first call: on a booth whose cache disk had
filled up every attempt to start the face swap failed with ``ENOSPC`` (a 35-line traceback each
time) and the notice named no folder; and where no folder at all is writable numba refuses to
even define a cached kernel (``RuntimeError: cannot cache function``).

:func:`kernel` is ``numba.njit(cache=True, ...)`` with the cache guarded: the first error reading
or writing the cache (or no writable folder at all) turns the disk cache off for every kernel of
this process, and :func:`cache_problem` holds one line naming the folder and what is wrong with
it, for the log (said once) and the staff notice. The kernels are then compiled in memory, as
fast as before; only the next start compiles them again. A later start tries the disk again.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numba
from numba import njit
from numba.core.caching import NullCache

from kiosk.util.files import shown

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_dispatchers: list[Any] = []  # every kernel made by :func:`kernel`
_problem = ""  # set once: the disk cache is off for this process


def cache_problem() -> str:
    """One line naming the kernel cache folder that could not be used and why; "" while it works."""
    return _problem


def cache_folder() -> str:
    """The kernel cache folder numba was given (``NUMBA_CACHE_DIR``), or ``""``."""
    return str(getattr(numba.config, "CACHE_DIR", "") or os.environ.get("NUMBA_CACHE_DIR", ""))


def _why(exc: BaseException) -> str:
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "is full"
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "is not writable"
    if code == errno.EFBIG:
        return "hit the file size limit (ulimit -f)"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot be used ({exc.strerror})"
    return f"cannot be used ({type(exc).__name__})"


def disable_cache(exc: BaseException, folder: str = "") -> None:
    """Turn the disk cache off for every kernel of this process, saying why once."""
    global _problem
    where = shown(folder or cache_folder() or "(numba's default)")
    with _lock:
        if _problem:
            return
        _problem = (
            f"kernel cache folder {where} {_why(exc)}: kernels compiled in memory this run "
            "(free space there or set NUMBA_CACHE_DIR)"
        )
        for dispatcher in _dispatchers:
            dispatcher._cache = NullCache()
    log.warning("%s", _problem)


def reset() -> None:
    """Forget the problem and use the disk cache again for kernels made from now on (tests)."""
    global _problem
    with _lock:
        _problem = ""


class _GuardedCache:
    """numba's per-kernel cache, with every read or write error turning the disk cache off."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def _folder(self) -> str:
        return str(getattr(self._inner, "_cache_path", "") or "")

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            return self._inner.load_overload(sig, target_context)
        except Exception as exc:  # OSError, a truncated or foreign index (EOFError, pickle errors)
            disable_cache(exc, cache_folder() or self._folder())
            return None

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            self._inner.save_overload(sig, data)
        except OSError as exc:
            disable_cache(exc, cache_folder() or self._folder())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def kernel(**options: Any) -> Callable[[F], F]:
    """``numba.njit(cache=True, **options)`` whose disk cache can never fail the kernel (see the
    module docstring)."""

    def wrap(fn: F) -> F:
        if _problem:
            dispatcher = njit(cache=False, **options)(fn)
        else:
            try:
                dispatcher = njit(cache=True, **options)(fn)
            except RuntimeError:  # "cannot cache function ...: no locator available": none writable
                disable_cache(PermissionError(errno.EACCES, "not writable"))
                dispatcher = njit(cache=False, **options)(fn)
            else:
                dispatcher._cache = _GuardedCache(dispatcher._cache)
        with _lock:
            _dispatchers.append(dispatcher)
            if _problem:
                dispatcher._cache = NullCache()
        return dispatcher  # type: ignore[no-any-return]

    return wrap
