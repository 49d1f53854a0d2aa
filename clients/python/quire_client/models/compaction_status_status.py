from enum import StrEnum

class CompactionStatusStatus(StrEnum):
    ERROR = "ERROR"
    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"

    def __str__(self) -> str:
        return str(self.value)
