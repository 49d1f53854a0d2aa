from enum import StrEnum

class ExamineMessageInitialposition(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"

    def __str__(self) -> str:
        return str(self.value)
