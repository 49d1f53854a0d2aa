from enum import StrEnum

class BookieInfoState(StrEnum):
    DECOMMISSIONED = "decommissioned"
    DECOMMISSIONING = "decommissioning"
    DOWN = "down"
    READ_ONLY = "read_only"
    WRITABLE = "writable"

    def __str__(self) -> str:
        return str(self.value)
