package adreno.rt;

import java.util.Arrays;

/** One input or output of a model: the model's own name, its dtype ("float32", "int64", ...), shape and size. */
public final class TensorInfo {
  public final String name;
  public final String dtype;
  private final long[] shape;
  /** The exact number of bytes a run takes or gives for it. */
  public final long bytes;

  public TensorInfo(String name, String dtype, long[] shape, long bytes) {
    this.name = name;
    this.dtype = dtype;
    this.shape = shape.clone();
    this.bytes = bytes;
  }

  public long[] shape() {
    return shape.clone();
  }

  @Override
  public String toString() {
    return name + " " + dtype + " " + Arrays.toString(shape);
  }
}
