package adreno.rt;

/** A failed call into libadreno_rt: the C API's status code (adreno_rt.h, adreno_rt_code) and its message. */
public final class AdrenoException extends Exception {
  /** adreno_rt_code: 1 invalid argument, 2 bad artifact, 3 no runtime, 4 device, 5 run failed, 6 closed. */
  private final int code;

  public AdrenoException(int code, String message) {
    super(message);
    this.code = code;
  }

  public int code() {
    return code;
  }
}
