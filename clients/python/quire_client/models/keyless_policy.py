from enum import StrEnum

class KeylessPolicy(StrEnum):
    DROP = "drop"
    KEEP = "keep"

    def __str__(self) -> str:
        return str(self.value)
