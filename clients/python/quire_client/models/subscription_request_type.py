from enum import StrEnum

class SubscriptionRequestType(StrEnum):
    EXCLUSIVE = "exclusive"
    FAILOVER = "failover"
    KEY_SHARED = "key_shared"
    SHARED = "shared"

    def __str__(self) -> str:
        return str(self.value)
