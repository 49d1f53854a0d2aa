from enum import StrEnum

class RemoveNamespaceBacklogQuotaBacklogquotatype(StrEnum):
    DESTINATION_STORAGE = "destination_storage"
    MESSAGE_AGE = "message_age"

    def __str__(self) -> str:
        return str(self.value)
