from enum import StrEnum

class PostSchemaPayloadType(StrEnum):
    AVRO = "AVRO"
    BOOLEAN = "BOOLEAN"
    BYTES = "BYTES"
    DATE = "DATE"
    DOUBLE = "DOUBLE"
    FLOAT = "FLOAT"
    INSTANT = "INSTANT"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    INT8 = "INT8"
    JSON = "JSON"
    KEY_VALUE = "KEY_VALUE"
    LOCAL_DATE = "LOCAL_DATE"
    LOCAL_DATE_TIME = "LOCAL_DATE_TIME"
    LOCAL_TIME = "LOCAL_TIME"
    NONE = "NONE"
    PROTOBUF = "PROTOBUF"
    PROTOBUF_NATIVE = "PROTOBUF_NATIVE"
    STRING = "STRING"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"

    def __str__(self) -> str:
        return str(self.value)
