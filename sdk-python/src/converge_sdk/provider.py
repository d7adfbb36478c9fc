"""The `Provider` base class a handler implements, and the `Registry` the runtime serves."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import RegistryError
from .types import KindVersion, Outcome, ProviderConfig, ReactionRequest


class Provider(abc.ABC):
    """Handler code for one (kind, kind_version).

    Set `kind` (a class attribute or a property) to the `KindVersion` served and implement
    `work`. A provider handles every reaction of its kind: switch on `req.reaction` or
    `req.stage` when the kind declares several. Raise `TerminalError` to stop retries until
    the spec changes, `TransientError` (or any other exception) to be retried.
    """

    @property
    @abc.abstractmethod
    def kind(self) -> KindVersion:
        """The pair this provider serves; the version must be at least 1."""

    @abc.abstractmethod
    async def work(self, req: ReactionRequest) -> Outcome:
        """Runs one task. Long handlers should watch `req.cancellation`."""

    def on_config(self, cfg: ProviderConfig) -> None:  # noqa: B027 - optional hook
        """Called with the kind's default provider config when first loaded and on every
        push (both parts empty: the config was deleted or never existed). Must not block."""

    def ready(self) -> bool:
        """Whether the provider can take tasks now; polled, and re-checked after each config
        push. A flip tells the broker to stop (or resume) sending this kind's tasks."""
        return True


class Registry:
    """The providers a worker serves, one per (kind, kind_version)."""

    def __init__(self, providers: Iterable[Provider] = ()) -> None:
        self._entries: list[tuple[KindVersion, Provider]] = []
        for p in providers:
            self.register(p)

    def register(self, provider: Provider) -> Registry:
        """Adds a provider; returns the registry (builder style)."""
        kv = provider.kind
        if not isinstance(kv, KindVersion):
            raise RegistryError(f"{type(provider).__name__}.kind must be a KindVersion, got {kv!r}")
        self._entries.append((kv, provider))
        return self

    def kinds(self) -> list[KindVersion]:
        """The registered pairs, in registration order."""
        return [kv for kv, _ in self._entries]

    def entries(self) -> list[tuple[KindVersion, Provider]]:
        """(pair, provider) in registration order."""
        return list(self._entries)

    def find(self, kind: str, version: int) -> Provider | None:
        """The provider of (kind, version), if registered."""
        for kv, p in self._entries:
            if kv.kind == kind and kv.version == version:
                return p
        return None

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry([{', '.join(str(kv) for kv, _ in self._entries)}])"

    def validated(self, only: Sequence[str] | None = None) -> Registry:
        """A checked copy, filtered to the kinds in `only` (the `WORKER_KINDS` filter)."""
        seen: set[KindVersion] = set()
        for kv, _ in self._entries:
            if not kv.kind:
                raise RegistryError("a provider has an empty kind")
            if kv.version < 1:
                raise RegistryError(
                    f"provider for kind {kv.kind!r} has version {kv.version}; versions start at 1"
                )
            if kv in seen:
                raise RegistryError(f"{kv} is registered twice")
            seen.add(kv)
        entries = self._entries
        if only is not None:
            unknown = [k for k in only if all(kv.kind != k for kv, _ in entries)]
            if unknown:
                raise RegistryError(
                    f"WORKER_KINDS names kinds no provider serves: {', '.join(unknown)}"
                )
            entries = [(kv, p) for kv, p in entries if kv.kind in only]
        if not entries:
            raise RegistryError("no providers registered")
        out = Registry()
        out._entries = list(entries)
        return out


def as_registry(providers: Registry | Iterable[Provider] | Any) -> Registry:
    """Accepts a Registry, a single Provider or an iterable of providers."""
    if isinstance(providers, Registry):
        return providers
    if isinstance(providers, Provider):
        return Registry([providers])
    return Registry(providers)
