from enum import StrEnum

class SetSchemaCompatibilityStrategyStrategy(StrEnum):
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    def __str__(self) -> str:
        return str(self.value)
