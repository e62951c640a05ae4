# SPDX-License-Identifier: MIT
"""Type hints for quadgrid (see __init__.py for the docstrings)."""
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Type, TypeVar, Union

import numpy as np
import numpy.typing as npt

version: str
KINDS: Tuple[str, ...]

def kinds() -> list[str]:
    """The index kind names, as a list (the same as ``KINDS``)."""

_Boxes = npt.ArrayLike  # (n, 4) real numbers, float32 preferred
_Points = npt.ArrayLike  # (n, 2) real numbers, float32 preferred
_Handles = npt.ArrayLike  # (n,) integers, int32 preferred
_I32 = npt.NDArray[np.int32]
_I64 = npt.NDArray[np.int64]
_F32 = npt.NDArray[np.float32]
_Bytes = Union[bytes, bytearray, memoryview, npt.NDArray[Any]]  # any bytes-like object
_T = TypeVar("_T", bound="Index")

class Index:
    """A spatial index of boxes (rows min_x, min_y, max_x, max_y)."""

    kind: str

    def __init__(
        self,
        kind: str = "point_grid",
        bounds: Optional[Sequence[float]] = None,
        *,
        element_size: float = 0.0,
        max_element_size: float = 0.0,
        max_depth: int = 0,
        leaf_capacity: int = 0,
        cell_size: float = 0.0,
        fixed_sizes: bool = False,
    ) -> None:
        """Creates an index of one kind; nothing else needs setting (the sizes and
        world are learned). bounds and the sizes are hints; fixed_sizes holds them."""
    def insert(self, boxes: _Boxes) -> _I32:
        """Inserts (n, 4) boxes; returns their int32 handles. All or nothing."""
    def move(self, handles: _Handles, boxes: _Boxes, threads: int = 1) -> None:
        """Gives each live handle its new box. Checked first; all or nothing."""
    def remove(self, handles: _Handles) -> None:
        """Removes live elements. Checked first; all or nothing."""
    def boxes(self, handles: _Handles) -> _F32:
        """The (n, 4) boxes of live handles."""
    def cleanup(self, threads: int = 1) -> None:
        """Once-a-frame upkeep, after the moves and before the queries."""
    def clear(self) -> None:
        """Removes every element."""
    def set_static(self, handles: _Handles, static: Union[bool, npt.ArrayLike] = True) -> None:
        """Marks elements static (never paired with each other) or dynamic."""
    def set_filter(self, handles: _Handles, category: Union[int, npt.ArrayLike] = 1,
                   mask: Union[int, npt.ArrayLike] = 0xFFFFFFFF) -> None:
        """Sets uint32 category/mask collision filters."""
    def pairs(self, threads: int = 1) -> _I32:
        """(m, 2) int32 overlapping pairs, a < b in each row."""
    def query(self, box: npt.ArrayLike) -> _I32:
        """Sorted handles of the boxes overlapping one area."""
    def query_many(self, boxes: _Boxes) -> Tuple[_I32, _I64]:
        """(handles, offsets): area i's handles are handles[offsets[i]:offsets[i+1]]."""
    def raycast(self, origins: _Points, directions: _Points, max_t: Union[float, npt.ArrayLike] = ...,
                closest: bool = False) -> Union[Tuple[_I32, _F32], Tuple[_I32, _F32, _I64]]:
        """closest: (handles, t) per ray; else (handles, t, offsets) of every hit."""
    def nearest(self, points: _Points, k: int, max_distance2: float = ...) -> Tuple[_I32, _F32]:
        """(handles, distances2), each (n, k), padded with -1 and inf."""
    def pair_events(self) -> Tuple[_I32, _I32]:
        """(began, ended) pairs since the previous call."""
    def __len__(self) -> int:
        """The number of live elements."""
    @property
    def stats(self) -> Dict[str, Any]:
        """memory_bytes, elements, nodes, leaves, max_depth_reached; element_size,
        size_bound, cell_size, max_depth, world, retunes (what the index learned)."""
    def validate(self) -> None:
        """Checks the internal invariants; RuntimeError if they fail."""
    def clone(self: _T) -> _T:
        """An independent copy that continues exactly as this index (qg_clone)."""
    def __copy__(self: _T) -> _T:
        """copy.copy: the same as clone() (other attributes shared)."""
    def __deepcopy__(self: _T, memo: Dict[int, Any]) -> _T:
        """copy.deepcopy: the same as clone() (other attributes deep-copied)."""
    def copy_from(self, other: "Index") -> None:
        """Makes this index a copy of other (same kind; qg_copy), in this one's memory."""
    def snapshot(self) -> bytes:
        """The whole state as bytes (qg_snapshot_write; docs/rollback.md)."""
    @classmethod
    def from_snapshot(cls: Type[_T], data: _Bytes) -> _T:
        """A new index from snapshot() bytes; ValueError for bad bytes, TypeError for non-bytes."""
    def __reduce__(self) -> Tuple[Callable[..., "Index"], Tuple[Any, ...], Optional[Dict[str, Any]]]:
        """pickle: through snapshot()."""
