from enum import StrEnum

class AuthAction(StrEnum):
    CONSUME = "consume"
    PRODUCE = "produce"

    def __str__(self) -> str:
        return str(self.value)
