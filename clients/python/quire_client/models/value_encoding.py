from enum import StrEnum

class ValueEncoding(StrEnum):
    BASE64 = "base64"
    TEXT = "text"

    def __str__(self) -> str:
        return str(self.value)
