"""The ACL's name registry: crew names <-> crew ids, and each name's declaration.

Links name crews by their ``name:`` (the only identity a YAML author has); messages
carry crew ids (minted at creation). The registry joins the two (spec §10.2): every crew
registers its name at creation, **even one that declares no links**, so that other crews'
links can name it. A crew id that was never registered has no name: no link can name
it, and it counts as a crew that never declared ``links:``.

Several crew ids may share one name (instances of one crew YAML); they then share its
declaration. External peers (spec §10.2.1) register with :meth:`AclRegistry.register_client`
under the link name ``client:NAME``; they never declare links.

Thread-safety: registration replaces an immutable snapshot under a lock; the ACL stage
reads the current snapshot without locking, so a check never blocks on a registration
and always sees a consistent state.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import attrs

from orkeon_actors.acl.grammar import CrewSpec, LinksBlock, load_crew_file, load_crew_yaml
from orkeon_actors.acl.links import AclConfigError, CrewLink, a2a_link_name, client_link_name, validate_crew_name
from orkeon_actors.errors import InvalidIdError
from orkeon_actors.model.ids import CrewId

__all__ = ["AclRegistry", "AclSnapshot"]


@attrs.frozen
class AclSnapshot:
    """One consistent view of the registry: what a single ACL decision reads."""

    names: Mapping[CrewId, str] = MappingProxyType({})
    ids: Mapping[str, frozenset[CrewId]] = MappingProxyType({})
    declarations: Mapping[str, LinksBlock] = MappingProxyType({})

    def name_of(self, crew_id: CrewId) -> str | None:
        """The registered name of ``crew_id``, or ``None`` if it was never registered."""
        return self.names.get(crew_id)

    def declaration_of(self, name: str | None) -> LinksBlock:
        """The declaration registered for ``name``; an unknown name (or ``None``) reads
        as never declared."""
        if name is None:
            return LinksBlock.undeclared()
        return self.declarations.get(name, LinksBlock.undeclared())


class AclRegistry:
    """Crew names, their ids and their ``links:`` declarations.

    Register each crew once at creation (:meth:`register_crew`, :meth:`register_spec` or
    :meth:`register_crew_yaml`), each external peer with :meth:`register_client`, and
    :meth:`unregister_crew` when a crew is gone for good. Hand the registry to
    :class:`~orkeon_actors.acl.AclMiddleware` (permissive default) or to a policy.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = AclSnapshot()

    @property
    def snapshot(self) -> AclSnapshot:
        """The current immutable view (lock-free)."""
        return self._snapshot

    def register_crew(
        self,
        name: str,
        crew_id: CrewId | str | None = None,
        links: Iterable[CrewLink] | LinksBlock | None = None,
    ) -> CrewId:
        """Register a crew under ``name`` and return its id (minted with
        ``CrewId.new()`` when ``crew_id`` is ``None``).

        ``links``: ``None`` means the crew never declared ``links:``; any iterable of
        :class:`CrewLink` (an empty one included) is a declaration that holds the crew to
        those links; a :class:`LinksBlock` is taken as is (what the YAML reader returns).

        Registering the same id under the same name and declaration again is a no-op.
        Raises :class:`AclConfigError` when the id is already registered under another
        name, when ``name`` is already registered with a different declaration (instances
        of one crew share its declaration: unregister the old ones first), or when
        ``name`` is invalid; ``InvalidIdError`` for an invalid id or ``CrewId.SYSTEM``.
        """
        validate_crew_name(name)
        return self._register(name, crew_id, _as_block(links))

    def register_spec(self, spec: CrewSpec, crew_id: CrewId | str | None = None) -> CrewId:
        """Register a crew read by :func:`~orkeon_actors.acl.load_crew_yaml`."""
        return self.register_crew(spec.name, crew_id, spec.links)

    def register_crew_yaml(self, source: str | os.PathLike[str], crew_id: CrewId | str | None = None) -> CrewId:
        """Read a crew YAML and register it. A ``str`` is the YAML *text*; a path object
        (``pathlib.Path``) is a file, or a directory whose ``crew.yaml`` is read.

        Discarded ``links:`` entries are logged; inspect them with
        ``registry.declaration(name).warnings``. Raises as :func:`load_crew_yaml`,
        :func:`load_crew_file` and :meth:`register_crew` do.
        """
        spec = load_crew_file(source) if isinstance(source, os.PathLike) else load_crew_yaml(source)
        return self.register_spec(spec, crew_id)

    def register_client(self, name: str, crew_id: CrewId | str | None = None) -> CrewId:
        """Register the external peer reached at ``client://{name}`` and return the crew
        id it binds the hub with (``hub.bind(crew_id)``) to send.

        Its link name is ``client:NAME``: crews name it that way in ``links:``. A client
        never declares links, so its own traffic follows the policy's default for
        undeclared senders (under ``RestrictiveCrewLinkPolicy``: only to crews that grant
        ``client:NAME`` an ``inbound`` or ``bidirectional`` link).
        """
        return self._register(client_link_name(name), crew_id, LinksBlock.undeclared())

    def register_a2a(self, name: str, crew_id: CrewId | str | None = None) -> CrewId:
        """Register the external A2A agent reached at ``a2a://{name}`` and return the
        crew id its answers are sent with (the bridge binds the hub with it).

        Its link name is ``a2a:NAME``. Unlike a client, it is never governed by the
        policy's default: a crew reaches it only through an ``outbound`` or
        ``bidirectional`` link naming it, and its answers reach a crew only through an
        ``inbound`` or ``bidirectional`` one (:mod:`orkeon_actors.acl.policy`).
        Registering the same name again returns the id it already has.
        """
        link_name = a2a_link_name(name)
        if crew_id is None:
            existing = self._snapshot.ids.get(link_name)
            if existing:
                return min(existing)
        return self._register(link_name, crew_id, LinksBlock.undeclared())

    def unregister_crew(self, crew_id: CrewId | str) -> None:
        """Forget ``crew_id``. The last id of a name takes the name's declaration with it,
        so the name can be registered again with new links. Unknown ids are ignored."""
        crew = CrewId(crew_id)
        with self._lock:
            snap = self._snapshot
            name = snap.names.get(crew)
            if name is None:
                return
            names = dict(snap.names)
            del names[crew]
            ids = dict(snap.ids)
            declarations = dict(snap.declarations)
            remaining = ids[name] - {crew}
            if remaining:
                ids[name] = remaining
            else:
                del ids[name]
                declarations.pop(name, None)
            self._snapshot = AclSnapshot(MappingProxyType(names), MappingProxyType(ids), MappingProxyType(declarations))

    def name_of(self, crew_id: CrewId | str) -> str | None:
        """The name ``crew_id`` was registered under, or ``None``."""
        return self._snapshot.name_of(CrewId(crew_id))

    def crew_ids(self, name: str) -> frozenset[CrewId]:
        """Every registered id of ``name`` (empty if none)."""
        return self._snapshot.ids.get(name, frozenset())

    def declaration(self, name: str) -> LinksBlock | None:
        """The declaration registered for ``name`` (with the YAML reader's warnings), or
        ``None`` if no crew of that name is registered."""
        return self._snapshot.declarations.get(name)

    def _register(self, name: str, crew_id: CrewId | str | None, block: LinksBlock) -> CrewId:
        crew = CrewId.new() if crew_id is None else CrewId(crew_id)
        if crew.is_system:
            raise InvalidIdError("CrewId.SYSTEM is the hub itself and cannot be registered as a crew")
        with self._lock:
            snap = self._snapshot
            previous_name = snap.names.get(crew)
            if previous_name is not None and previous_name != name:
                raise AclConfigError(
                    f"crew id {crew} is already registered as {previous_name!r}; a crew has one name: "
                    f"unregister it first to register it as {name!r}"
                )
            existing = snap.declarations.get(name)
            if existing is not None and existing != block:
                raise AclConfigError(
                    f"a crew named {name!r} is already registered with a different links: declaration; "
                    "crews sharing a name share its declaration: unregister the running instances "
                    f"({', '.join(sorted(snap.ids.get(name, ())))}) before registering new links"
                )
            if previous_name is not None:
                return crew
            names = dict(snap.names)
            names[crew] = name
            ids = dict(snap.ids)
            ids[name] = ids.get(name, frozenset()) | {crew}
            declarations = dict(snap.declarations)
            if existing is None:
                declarations[name] = block
            self._snapshot = AclSnapshot(MappingProxyType(names), MappingProxyType(ids), MappingProxyType(declarations))
        return crew

    def __repr__(self) -> str:
        snap = self._snapshot
        return f"AclRegistry({len(snap.names)} crew ids, {len(snap.declarations)} names)"


def _as_block(links: Iterable[CrewLink] | LinksBlock | None) -> LinksBlock:
    if links is None:
        return LinksBlock.undeclared()
    if isinstance(links, LinksBlock):
        return links
    if isinstance(links, (str, bytes, Mapping)):
        raise AclConfigError(
            f"links must be CrewLink values (or a LinksBlock from the YAML reader), got {links!r}; "
            "to read YAML use register_crew_yaml"
        )
    return LinksBlock.of(links)
