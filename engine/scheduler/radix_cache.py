"""The radix prefix cache: KV pages of earlier requests, found again by their tokens (edges are runs
of whole pages, as in Mini-SGLang). When a request locks, inserts and releases is the scheduler's
call (``cache_manager.py``): that is where overlap's hazards live."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(eq=False)
class Node:
    """One edge of the tree: ``key`` (its pages' tokens, ``len(pages) * page_size`` of them) and
    the ``pages`` that hold their K/V; ``lock`` counts the requests reading it or a descendant."""

    key: tuple[int, ...] = ()
    pages: list[int] = field(default_factory=list)
    parent: Node | None = None
    children: dict[tuple[int, ...], Node] = field(default_factory=dict)
    lock: int = 0
    last_used: int = 0


class RadixCache:
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.root = Node()
        self.cached_pages = 0           # pages the tree owns
        self.locked_pages = 0           # of those, pages of locked nodes
        self._clock = itertools.count(1)

    def evictable(self) -> int:
        """Pages held only by the tree (no request reads them): what eviction can free."""
        return self.cached_pages - self.locked_pages

    def match(self, tokens: Sequence[int]) -> tuple[list[int], Node]:
        """The pages of the longest page-aligned prefix of ``tokens`` the tree holds, and the
        node where that prefix ends (the root for none). Marks the path as just used."""
        ps, node, pages, at = self.page_size, self.root, [], 0
        now = next(self._clock)
        while at + ps <= len(tokens):
            child = node.children.get(tuple(tokens[at:at + ps]))
            if child is None:
                break
            same = self._common_pages(child.key, tokens, at)
            if same < len(child.pages):
                child = self._split(child, same)
            child.last_used = now
            pages.extend(child.pages)
            at += len(child.key)
            node = child
        return pages, node

    def insert(self, tokens: Sequence[int], pages: Sequence[int], node: Node) -> tuple[Node, int]:
        """Hand ``pages`` (holding ``tokens``) to the tree below ``node``, where the caller's cached
        prefix ends; returns where it ends now and how many pages the tree took. Where the tree
        already holds more of ``tokens``, it takes none: no position is read through two pages."""
        ps, start = self.page_size, self._depth_pages(node)
        assert len(tokens) == len(pages) * ps, "insert: tokens and pages disagree"
        if len(pages) <= start or not self.attached(node):
            return node, 0                   # (evicted under an unlocked reader: hazard lab)
        first = tuple(tokens[start * ps:(start + 1) * ps])
        if first in node.children:
            return node, 0                   # someone else's pages hold these tokens already
        new = Node(tuple(tokens[start * ps:]), list(pages[start:]), node,
                   last_used=next(self._clock))
        node.children[first] = new
        self.cached_pages += len(new.pages)
        return new, len(new.pages)

    def lock(self, node: Node) -> None:
        while node is not self.root:
            if node.lock == 0:
                self.locked_pages += len(node.pages)
            node.lock += 1
            node = node.parent

    def unlock(self, node: Node) -> None:
        while node is not self.root:
            node.lock -= 1
            assert node.lock >= 0, "radix cache: a node was unlocked more often than locked"
            if node.lock == 0:
                self.locked_pages -= len(node.pages)
            node = node.parent

    def evict(self, n: int) -> list[int]:
        """Remove least recently used unlocked leaves until ``n`` pages are freed (or none is
        left to remove); returns the freed pages (the caller gives them back to the pool)."""
        leaves = [(leaf.last_used, id(leaf), leaf) for leaf in self.nodes()
                  if not leaf.children and leaf.lock == 0]
        heapq.heapify(leaves)
        freed: list[int] = []
        while leaves and len(freed) < n:
            _, _, leaf = heapq.heappop(leaves)
            parent = leaf.parent
            del parent.children[leaf.key[:self.page_size]]
            freed.extend(leaf.pages)
            self.cached_pages -= len(leaf.pages)
            if parent is not self.root and not parent.children and parent.lock == 0:
                heapq.heappush(leaves, (parent.last_used, id(parent), parent))
        return freed

    def evict_all(self) -> list[int]:
        """Every unlocked page (all of them when no request runs)."""
        return self.evict(self.cached_pages)

    def nodes(self) -> list[Node]:
        out, todo = [], list(self.root.children.values())
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(node.children.values())
        return out

    def problems(self) -> list[str]:
        """What is wrong with the tree's own accounting (an empty list when nothing is)."""
        found, seen = [], set()
        nodes = self.nodes()
        for node in nodes:
            if len(node.key) != len(node.pages) * self.page_size or not node.pages:
                found.append(f"a node's key has {len(node.key)} tokens for {len(node.pages)} pages")
            if node.parent.children.get(node.key[:self.page_size]) is not node:
                found.append("a node is not its parent's child under its first page's tokens")
            if seen & set(node.pages):
                found.append(f"pages {sorted(seen & set(node.pages))} are in two nodes")
            seen |= set(node.pages)
            if node.lock < 0 or any(c.lock > node.lock for c in node.children.values()):
                found.append("a child is locked more than its parent")
        if len(seen) != self.cached_pages:
            found.append(f"{len(seen)} pages in the tree, {self.cached_pages} counted")
        locked = sum(len(n.pages) for n in nodes if n.lock > 0)
        if locked != self.locked_pages:
            found.append(f"{locked} pages locked, {self.locked_pages} counted")
        return found

    def _common_pages(self, key: tuple[int, ...], tokens: Sequence[int], at: int) -> int:
        """How many whole pages of ``key`` equal ``tokens`` from ``at`` on."""
        ps, n = self.page_size, 0
        while (n + 1) * ps <= len(key) and at + (n + 1) * ps <= len(tokens) \
                and tuple(tokens[at + n * ps:at + (n + 1) * ps]) == key[n * ps:(n + 1) * ps]:
            n += 1
        return n

    def _split(self, node: Node, pages: int) -> Node:
        """Cut ``node``'s edge after ``pages`` pages; returns the new upper part."""
        ps = self.page_size
        upper = Node(node.key[:pages * ps], node.pages[:pages], node.parent, lock=node.lock,
                     last_used=node.last_used)
        node.parent.children[upper.key[:ps]] = upper
        node.key, node.pages, node.parent = node.key[pages * ps:], node.pages[pages:], upper
        upper.children[node.key[:ps]] = node
        return upper

    def attached(self, node: Node) -> bool:
        """Is ``node`` still in the tree (not evicted)?"""
        while node is not self.root:
            parent = node.parent
            if parent is None or parent.children.get(node.key[:self.page_size]) is not node:
                return False
            node = parent
        return True

    def _depth_pages(self, node: Node) -> int:
        depth = 0
        while node is not self.root:
            depth += len(node.pages)
            node = node.parent
        return depth
