"""The router's index: which entries a topic reaches, at a cost that does not grow with
the number of entries (issue 31).

Exact topics (no ``*`` or ``#``) sit in one table keyed by the topic; patterns sit in a
trie of their words, with a ``*`` and a ``#`` branch beside the literal words at every
node. Adding or removing an entry touches one bucket (a dict keyed by the entry's
sequence number); matching a topic of *w* words visits at most (trie nodes on the
topic's paths) x *w* states, whatever the number of entries. Matches come back in the
order the entries were added, as the linear router returned them.

Semantics are AMQP's (``*`` one word, ``#`` zero or more), exactly those of the
reference matcher :func:`orkeon_actors.hub.routing.topic_matches`; a property test holds
the two together. Not thread-safe: :class:`~orkeon_actors.hub.routing.TopicRouter`
serialises every call.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["TopicIndex", "is_pattern"]

E = TypeVar("E")


def is_pattern(topic: str) -> bool:
    """Whether ``topic`` has a wildcard (``*`` or ``#``) anywhere in it."""
    return "*" in topic or "#" in topic


class _Node(Generic[E]):
    """One trie node: the entries whose pattern ends here, and the next words."""

    __slots__ = ("entries", "hash", "star", "words")

    def __init__(self) -> None:
        self.words: dict[str, _Node[E]] = {}
        self.star: _Node[E] | None = None
        self.hash: _Node[E] | None = None
        self.entries: dict[int, E] = {}

    def child(self, word: str) -> _Node[E] | None:
        if word == "*":
            return self.star
        if word == "#":
            return self.hash
        return self.words.get(word)

    def make_child(self, word: str) -> _Node[E]:
        found = self.child(word)
        if found is not None:
            return found
        node: _Node[E] = _Node()
        if word == "*":
            self.star = node
        elif word == "#":
            self.hash = node
        else:
            self.words[word] = node
        return node

    def drop_child(self, word: str) -> None:
        if word == "*":
            self.star = None
        elif word == "#":
            self.hash = None
        else:
            del self.words[word]

    def empty(self) -> bool:
        return not self.entries and not self.words and self.star is None and self.hash is None


class TopicIndex(Generic[E]):
    """Entries by the topic or pattern they listen on (``key(entry)``, fixed while the
    entry is in the index). Each entry is held once, however often it is added."""

    def __init__(self) -> None:
        self._exact: dict[str, dict[int, E]] = {}
        self._root: _Node[E] = _Node()
        self._seq: dict[int, tuple[int, str]] = {}  # id(entry) -> (its sequence number, its pattern)
        self._next = 0

    def __len__(self) -> int:
        return len(self._seq)

    def add(self, entry: E, pattern: str) -> None:
        if id(entry) in self._seq:
            return
        seq = self._next
        self._next += 1
        self._seq[id(entry)] = (seq, pattern)
        if not is_pattern(pattern):
            bucket = self._exact.get(pattern)
            if bucket is None:
                bucket = self._exact[pattern] = {}
            bucket[seq] = entry
            return
        node = self._root
        for word in pattern.split("."):
            node = node.make_child(word)
        node.entries[seq] = entry

    def remove(self, entry: E) -> bool:
        """Take ``entry`` out; ``False`` if it was not in."""
        held = self._seq.pop(id(entry), None)
        if held is None:
            return False
        seq, pattern = held
        if not is_pattern(pattern):
            bucket = self._exact[pattern]
            del bucket[seq]
            if not bucket:
                del self._exact[pattern]
            return True
        path: list[tuple[_Node[E], str]] = []
        node = self._root
        for word in pattern.split("."):
            child = node.child(word)
            assert child is not None, "an indexed pattern's path is in the trie"
            path.append((node, word))
            node = child
        del node.entries[seq]
        for parent, word in reversed(path):  # prune the branch it alone kept alive
            if not node.empty():
                break
            parent.drop_child(word)
            node = parent
        return True

    def clear(self) -> None:
        self._exact = {}
        self._root = _Node()
        self._seq = {}

    def values(self) -> list[E]:
        """Every entry, in the order they were added."""
        found: dict[int, E] = {}
        for bucket in self._exact.values():
            found.update(bucket)
        stack = [self._root]
        while stack:
            node = stack.pop()
            found.update(node.entries)
            stack.extend(node.words.values())
            stack.extend(n for n in (node.star, node.hash) if n is not None)
        return [found[seq] for seq in sorted(found)]

    def match(self, topic: str) -> list[E]:
        """Every entry whose pattern matches ``topic``, in the order they were added."""
        exact = self._exact.get(topic)
        root = self._root
        if root.empty():
            return [] if exact is None else list(exact.values())
        found: dict[int, E] = {} if exact is None else dict(exact)
        words = topic.split(".")
        count = len(words)
        seen: set[tuple[int, int]] = set()
        stack: list[tuple[_Node[E], int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            state = (id(node), i)
            if state in seen:
                continue
            seen.add(state)
            if i == count:
                if node.entries:
                    found.update(node.entries)
            else:
                child = node.words.get(words[i])
                if child is not None:
                    stack.append((child, i + 1))
                if node.star is not None:
                    stack.append((node.star, i + 1))
            hashed = node.hash
            if hashed is not None:  # '#' absorbs zero, one, ... up to every remaining word
                stack.extend((hashed, j) for j in range(i, count + 1))
        if len(found) < 2 or (exact is not None and len(found) == len(exact)):
            return list(found.values())
        return [found[seq] for seq in sorted(found)]
