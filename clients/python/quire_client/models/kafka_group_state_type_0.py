from enum import StrEnum

class KafkaGroupStateType0(StrEnum):
    COMPLETINGREBALANCE = "CompletingRebalance"
    DEAD = "Dead"
    EMPTY = "Empty"
    PREPARINGREBALANCE = "PreparingRebalance"
    STABLE = "Stable"

    def __str__(self) -> str:
        return str(self.value)
