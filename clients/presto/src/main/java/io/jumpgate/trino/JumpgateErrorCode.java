package io.jumpgate.trino;

import io.trino.spi.ErrorCode;
import io.trino.spi.ErrorCodeSupplier;
import io.trino.spi.ErrorType;

public enum JumpgateErrorCode implements ErrorCodeSupplier {
    /** The Jumpgate server could not be reached. */
    JUMPGATE_UNREACHABLE(0, ErrorType.EXTERNAL),
    /** The server refused the request (it names the operation). */
    JUMPGATE_REJECTED(1, ErrorType.EXTERNAL),
    /** The job failed, was cancelled, or one of its streams broke. */
    JUMPGATE_JOB_FAILED(2, ErrorType.EXTERNAL),
    /** The job did not finish within jumpgate.job-timeout. */
    JUMPGATE_TIMEOUT(3, ErrorType.EXTERNAL);

    private final ErrorCode code;

    JumpgateErrorCode(int code, ErrorType type) {
        this.code = new ErrorCode(code + 0x0730_0000, name(), type);
    }

    @Override
    public ErrorCode toErrorCode() {
        return code;
    }
}
