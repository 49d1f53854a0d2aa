from enum import StrEnum

class BacklogQuotaUpdatePolicyType0(StrEnum):
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"
    PRODUCER_EXCEPTION = "producer_exception"
    PRODUCER_REQUEST_HOLD = "producer_request_hold"

    def __str__(self) -> str:
        return str(self.value)
