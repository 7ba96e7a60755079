"""Checkpoints from the Hugging Face hub, guarded: what is fetched, what is refused, and why.

``fetch_hub_model`` fetches the small files first, checked for a supported architecture, no custom
code and safetensors weights; then the weights, under a size cap (``OVERLAP_DEMO_HUB_MAX_BYTES``)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HUB_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
# Small instruct models that pass the guards, for the app's model list (fetched on first use).
SUGGESTED_MODELS = ("HuggingFaceTB/SmolLM2-135M-Instruct", "Qwen/Qwen2.5-0.5B-Instruct",
                    "Qwen/Qwen3-0.6B")
HUB_MAX_BYTES = 3 * 2**30
META_PATTERNS = ["*.json", "*.txt", "*.model", "*.tiktoken", "*.jinja"]
WEIGHT_PATTERNS = ["*.safetensors"]
_TRUE = ("1", "on", "yes", "true")


class HubError(ValueError):
    """A hub model that cannot be used; the message says which guard refused it and why."""


class HubUnreachable(HubError):
    """The model is not (wholly) in the local cache and the hub cannot be reached: offline."""


@dataclass(frozen=True)
class HubProgress:
    """Where a fetch stands: ``stage`` is "checking", "downloading" or "ready"."""

    stage: str
    repo_id: str
    done_bytes: int = 0
    total_bytes: int = 0

    def describe(self) -> str:
        mb = 2**20
        if self.stage == "downloading":
            return (f"downloading {self.repo_id}: {self.done_bytes / mb:.1f} of "
                    f"{self.total_bytes / mb:.1f} MiB")
        if self.stage == "ready":
            return f"{self.repo_id}: {self.total_bytes / mb:.1f} MiB of weights ready"
        return f"checking {self.repo_id} on the hub"


Progress = Callable[[HubProgress], None]


_ID_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def is_hub_id(name: str) -> bool:
    """``name`` has the form of a hub repository id ("org/name"), and names nothing on disk: the
    app takes hub ids from its visitors and must never read a server path they type."""
    parts = name.split("/")
    return (len(parts) == 2 and all(_ID_PART.fullmatch(part) and ".." not in part
                                    for part in parts)
            and not Path(name).exists())


def hub_cache_dir() -> Path:
    """The hub cache, as huggingface_hub finds it, read now (HF_HUB_CACHE, else HF_HOME/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_offline() -> bool:
    return any(os.environ.get(name, "").strip().lower() in _TRUE
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def max_hub_bytes() -> int:
    value = os.environ.get("OVERLAP_DEMO_HUB_MAX_BYTES", "")
    return int(value) if value.isdigit() else HUB_MAX_BYTES


def fetch_hub_model(repo_id: str, progress: Progress | None = None) -> Path:
    """A checked local snapshot of ``repo_id`` (see the module docstring); ``HubError`` if not."""
    report = progress or (lambda _: None)
    cap = max_hub_bytes()
    report(HubProgress("checking", repo_id))
    folder = _download(repo_id, META_PATTERNS)
    check_files(folder, repo_id)
    sizes = _weight_sizes(repo_id, folder)
    total = sum(sizes.values())
    if not sizes:
        if hub_offline() and not any(folder.glob("*.bin")):
            raise HubUnreachable(f"the weights of {repo_id} are not in the local hub cache "
                           f"({hub_cache_dir()}) and this machine is offline (HF_HUB_OFFLINE=1)")
        raise HubError(f"{repo_id} has no safetensors weights; only safetensors are loaded from "
                       "the hub (pickled .bin weights can run code when loaded)")
    if total > cap:
        raise HubError(f"{repo_id} has {total / 2**30:.2f} GiB of weights; the limit is "
                       f"{cap / 2**30:.2f} GiB (OVERLAP_DEMO_HUB_MAX_BYTES raises it)")
    folder = _download(repo_id, WEIGHT_PATTERNS, _bar_class(repo_id, total, report))
    report(HubProgress("ready", repo_id, total, total))
    return folder


def cached_snapshot(repo_id: str) -> Path | None:
    """The cached snapshot of ``repo_id`` with its weights, or None; never touches the network
    (for a model list that marks what is ready to run)."""
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=META_PATTERNS,
                                        cache_dir=hub_cache_dir(), local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, or not a valid id: either way, not ready
        return None
    return folder if any(folder.glob("*.safetensors")) else None


def check_files(folder: Path, repo_id: str) -> None:
    """The architecture and remote-code guards, on the small files already fetched."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise HubError(f"{repo_id} has no config.json: not a transformers model checkpoint")
    try:
        config = json.loads(config_path.read_text())
    except ValueError as error:
        raise HubError(f"{repo_id}: config.json is not JSON ({error})") from None
    try:
        tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):                    # none, or unreadable: no auto_map there
        tokenizer = {}
    if config.get("auto_map") or tokenizer.get("auto_map"):
        raise HubError(f"{repo_id} needs custom code (auto_map: trust_remote_code); remote code "
                       "is never run here")
    archs = config.get("architectures") or []
    if not any(a in HUB_ARCHITECTURES for a in archs):
        raise HubError(f"{repo_id} is a {', '.join(archs) or config.get('model_type', '?')}; "
                       f"hub models must be one of {', '.join(HUB_ARCHITECTURES)}")


def _download(repo_id: str, patterns: list[str], bar: Any = None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        IncompleteSnapshotError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    cache, offline = hub_cache_dir(), hub_offline()
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns, cache_dir=cache,
                                      local_files_only=offline, tqdm_class=bar))
    except HFValidationError as error:
        raise HubError(f"{repo_id!r} is not a valid hub model id ({error})") from None
    except GatedRepoError:
        raise HubError(f"{repo_id} is gated on the hub: accept its license there and log in "
                       "(hf auth login)") from None
    except RepositoryNotFoundError:
        raise HubError(f"there is no model {repo_id} on the hub (or it is private)") from None
    except IncompleteSnapshotError:
        raise HubUnreachable(f"the cached snapshot of {repo_id} in {cache} is incomplete and "
                             "the hub cannot be reached to finish it") from None
    except LocalEntryNotFoundError:
        why = ("this machine is offline (HF_HUB_OFFLINE=1)" if offline else
               "the hub could not be reached")
        raise HubUnreachable(f"{repo_id} is not in the local hub cache ({cache}) and {why}: "
                             "fetch it where a network exists, or point HF_HUB_CACHE at a cache "
                             "that has it") from None
    except Exception as error:  # noqa: BLE001 - any other hub failure: one clear message
        raise HubError(f"{repo_id}: the hub download failed ({type(error).__name__}: "
                       f"{error})") from None


def _weight_sizes(repo_id: str, folder: Path) -> dict[str, int]:
    """Sizes of the repo's safetensors files: from the hub's listing before download, or, when
    the hub cannot be asked (offline), from the cached snapshot."""
    if not hub_offline():
        from huggingface_hub import snapshot_download

        try:
            infos = snapshot_download(repo_id, allow_patterns=WEIGHT_PATTERNS,
                                      cache_dir=hub_cache_dir(), dry_run=True)
            return {i.filename: int(i.file_size or 0) for i in infos}
        except Exception:  # noqa: BLE001 - no listing (no network): fall back to the cache
            pass
    return {p.name: p.stat().st_size for p in folder.glob("*.safetensors")}


def _bar_class(repo_id: str, total: int, report: Progress) -> type:
    """A tqdm class for ``snapshot_download`` that draws nothing and reports bytes written."""
    from tqdm.auto import tqdm

    class _Bar(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.counts_bytes = kwargs.get("unit") == "B" and \
                str(kwargs.get("desc", "")).startswith("Reconstruct")
            self.done = int(kwargs.get("initial") or 0)
            kwargs["disable"] = True
            kwargs.pop("name", None)
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            self.done += int(n or 0)
            if self.counts_bytes:
                report(HubProgress("downloading", repo_id, min(self.done, total), total))
            return None

    return _Bar
