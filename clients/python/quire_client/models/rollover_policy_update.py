from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast






T = TypeVar("T", bound="RolloverPolicyUpdate")



@_attrs_define
class RolloverPolicyUpdate:
    """ A rollover policy as posted (topic or namespace): the fields left out keep their effective
    value.

        Attributes:
            max_entries_per_ledger (int | None | Unset):
            max_rollover_time_ms (int | None | Unset):
            max_size_per_ledger_bytes (int | None | Unset):
            min_rollover_time_ms (int | None | Unset):
     """

    max_entries_per_ledger: int | None | Unset = UNSET
    max_rollover_time_ms: int | None | Unset = UNSET
    max_size_per_ledger_bytes: int | None | Unset = UNSET
    min_rollover_time_ms: int | None | Unset = UNSET





    def to_dict(self) -> dict[str, Any]:
        max_entries_per_ledger: int | None | Unset
        if isinstance(self.max_entries_per_ledger, Unset):
            max_entries_per_ledger = UNSET
        else:
            max_entries_per_ledger = self.max_entries_per_ledger

        max_rollover_time_ms: int | None | Unset
        if isinstance(self.max_rollover_time_ms, Unset):
            max_rollover_time_ms = UNSET
        else:
            max_rollover_time_ms = self.max_rollover_time_ms

        max_size_per_ledger_bytes: int | None | Unset
        if isinstance(self.max_size_per_ledger_bytes, Unset):
            max_size_per_ledger_bytes = UNSET
        else:
            max_size_per_ledger_bytes = self.max_size_per_ledger_bytes

        min_rollover_time_ms: int | None | Unset
        if isinstance(self.min_rollover_time_ms, Unset):
            min_rollover_time_ms = UNSET
        else:
            min_rollover_time_ms = self.min_rollover_time_ms


        field_dict: dict[str, Any] = {}

        field_dict.update({
        })
        if max_entries_per_ledger is not UNSET:
            field_dict["maxEntriesPerLedger"] = max_entries_per_ledger
        if max_rollover_time_ms is not UNSET:
            field_dict["maxRolloverTimeMs"] = max_rollover_time_ms
        if max_size_per_ledger_bytes is not UNSET:
            field_dict["maxSizePerLedgerBytes"] = max_size_per_ledger_bytes
        if min_rollover_time_ms is not UNSET:
            field_dict["minRolloverTimeMs"] = min_rollover_time_ms

        return field_dict



    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        def _parse_max_entries_per_ledger(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_entries_per_ledger = _parse_max_entries_per_ledger(d.pop("maxEntriesPerLedger", UNSET))


        def _parse_max_rollover_time_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_rollover_time_ms = _parse_max_rollover_time_ms(d.pop("maxRolloverTimeMs", UNSET))


        def _parse_max_size_per_ledger_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_size_per_ledger_bytes = _parse_max_size_per_ledger_bytes(d.pop("maxSizePerLedgerBytes", UNSET))


        def _parse_min_rollover_time_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        min_rollover_time_ms = _parse_min_rollover_time_ms(d.pop("minRolloverTimeMs", UNSET))


        rollover_policy_update = cls(
            max_entries_per_ledger=max_entries_per_ledger,
            max_rollover_time_ms=max_rollover_time_ms,
            max_size_per_ledger_bytes=max_size_per_ledger_bytes,
            min_rollover_time_ms=min_rollover_time_ms,
        )

        return rollover_policy_update

