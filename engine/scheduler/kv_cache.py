"""Paged KV memory: a pool of fixed-size pages, an allocator with exact accounting, the tensors. The
last page is a *scratch* page padding writes into. ``IdPool`` knows who holds each id, so a double
free or a leak is caught when it happens."""

from __future__ import annotations

from collections import deque

CACHE_OWNER = -1                 # the owner id of pages held by the prefix cache


class DoubleFreeError(RuntimeError):
    """An id was freed that is not currently allocated (freed twice, or never allocated)."""

    def __init__(self, what: str, item: int, request: int, held_by_other: bool) -> None:
        self.what, self.item, self.request, self.held_by_other = what, item, request, held_by_other
        super().__init__(f"{what} {item} freed by request {request} but it is "
                         f"{'held by another' if held_by_other else 'free'}")

    def details(self) -> dict:
        """The facts, for a report that names them in the reader's language."""
        return {"what": self.what, "item": self.item, "request": self.request,
                "held_by_other": self.held_by_other}


class IdPool:
    """A free list of ids ``0..n-1`` with ownership: ``can_allocate`` / ``allocate`` / ``free``."""

    def __init__(self, n: int, what: str) -> None:
        self.what = what
        self.total = n
        self._free: deque[int] = deque(range(n))
        self._owner: dict[int, int] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    def can_allocate(self, n: int) -> bool:
        return n <= len(self._free)

    def allocate(self, n: int, owner: int) -> list[int]:
        if n > len(self._free):
            raise MemoryError(f"{self.what}: asked for {n}, only {len(self._free)} free")
        ids = [self._free.popleft() for _ in range(n)]
        for i in ids:
            self._owner[i] = owner
        return ids

    def owner(self, i: int) -> int | None:
        return self._owner.get(i)

    @property
    def num_held(self) -> int:
        return len(self._owner)

    def held_by(self, owner: int) -> set[int]:
        return {i for i, o in self._owner.items() if o == owner}

    def transfer(self, ids: list[int], owner: int, new_owner: int) -> None:
        """``owner`` hands ``ids`` to ``new_owner`` (a request's pages to the prefix cache)."""
        for i in ids:
            if self._owner.get(i) != owner:
                raise DoubleFreeError(self.what, i, owner, held_by_other=i in self._owner)
        for i in ids:
            self._owner[i] = new_owner

    def free(self, ids: list[int], owner: int) -> None:
        for i in ids:
            if self._owner.get(i) != owner:
                raise DoubleFreeError(self.what, i, owner, held_by_other=i in self._owner)
        for i in ids:
            del self._owner[i]
            self._free.append(i)


def pages_needed(num_tokens: int, page_size: int) -> int:
    return -(-num_tokens // page_size)


def allocate_kv_tensors(num_layers: int, num_pages: int, page_size: int, num_kv_heads: int,
                        head_dim: int, dtype, device) -> list:
    """Per layer (k, v), each ``[(num_pages + 1) * page_size, KV, D]``; the last page is scratch."""
    import torch  # here, so the pools above (and the hazard lab's checks) import without torch

    slots = (num_pages + 1) * page_size
    return [(torch.zeros(slots, num_kv_heads, head_dim, dtype=dtype, device=device),
             torch.zeros(slots, num_kv_heads, head_dim, dtype=dtype, device=device))
            for _ in range(num_layers)]
