package adreno.rt;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * An adreno artifact opened through libadreno_rt (its C API, adreno_rt.h), via libadreno_rt_jni. Safe to use from
 * several threads: the library serialises the calls on one model. Every failure is an {@link AdrenoException}
 * carrying the library's status code and message.
 *
 * <pre>
 * try (AdrenoModel model = AdrenoModel.open(new File(dir), new AdrenoModel.Options())) {
 *   float[][] outputs = model.run(new float[(int) (model.inputs().get(0).bytes / 4)]);
 * }
 * </pre>
 */
public final class AdrenoModel implements AutoCloseable {
  static {
    // adreno's OpenCL plugin from the app's native libraries (an APK's lib/arm64-v8a/): when it is not found
    // here, libadreno_rt looks beside itself at open and says why in the AdrenoException.
    try {
      System.loadLibrary("tvm_runtime_opencl");
    } catch (UnsatisfiedLinkError e) {
      // reported by open()
    }
    System.loadLibrary("adreno_rt_jni");
  }

  /** How to open a model; the defaults are the C API's (device 0, no blob, one weight thread per core). */
  public static final class Options {
    int deviceIndex = 0;
    String deviceName = null;
    String blobPath = null;
    boolean writeBlob = true;
    int weightThreads = 0;
    String pluginPath = null;

    /** The device-th OpenCL device of every platform's. */
    public Options device(int index) {
      deviceIndex = index;
      return this;
    }

    /** The first OpenCL device whose "platform|device|driver" contains {@code name}. */
    public Options device(String name) {
      deviceName = name;
      return this;
    }

    /** The program-binary file (in the app's private storage), rewritten after a start that built programs. */
    public Options blob(File file, boolean write) {
      blobPath = file.getPath();
      writeBlob = write;
      return this;
    }

    /** Threads for rebuilding the stored weights at open (0: one per core). */
    public Options weightThreads(int threads) {
      weightThreads = threads;
      return this;
    }

    /** adreno's OpenCL plugin, when it is not beside libadreno_rt.so. */
    public Options plugin(File file) {
      pluginPath = file.getPath();
      return this;
    }
  }

  private final long handle;
  private volatile List<TensorInfo> inputs;
  private volatile List<TensorInfo> outputs;
  private volatile boolean closed = false;

  private AdrenoModel(long handle) throws AdrenoException {
    this.handle = handle;
    this.inputs = ports(true);
    this.outputs = ports(false);
  }

  /** Opens the artifact directory (manifest.json, plan.json, params.npz, lib.so). */
  public static AdrenoModel open(File dir, Options options) throws AdrenoException {
    Options o = options == null ? new Options() : options;
    long handle = nativeOpen(dir.getPath(), o.deviceIndex, o.deviceName, o.blobPath, o.writeBlob, o.weightThreads,
        o.pluginPath);
    try {
      return new AdrenoModel(handle);
    } catch (AdrenoException e) {
      nativeClose(handle);
      throw e;
    }
  }

  /** The artifact's shape sets (1 for an artifact of one shape); the first is selected at open. */
  public int shapeSetCount() throws AdrenoException {
    return nativeShapeSetCount(handle);
  }

  /** The selected shape set's index. */
  public int selectedShapeSet() throws AdrenoException {
    return nativeSelectedShapeSet(handle);
  }

  /**
   * Selects the shape set whose inputs have exactly these shapes (one per input, in {@link #inputs()}'s order), as
   * {@code adreno run} chooses one; {@link #inputs()}, {@link #outputs()} and the runs are then that set's. No such
   * set: an AdrenoException (code 1) whose message lists the artifact's sets, and the selection is kept. Padding an
   * input to a shape the artifact has is the app's choice (docs/app.md).
   */
  public void selectShapes(long[]... shapes) throws AdrenoException {
    nativeSelectShapes(handle, shapes);
    inputs = ports(true);
    outputs = ports(false);
  }

  /** The selected shape set's inputs. */
  public List<TensorInfo> inputs() {
    return inputs;
  }

  /** The selected shape set's outputs. */
  public List<TensorInfo> outputs() {
    return outputs;
  }

  /**
   * Runs once on direct buffers, each from its position to its limit exactly the tensor's bytes (native byte
   * order): inputs are read from the caller's memory and outputs written into it, with no copy in between.
   */
  public void run(ByteBuffer[] inputBuffers, ByteBuffer[] outputBuffers) throws AdrenoException {
    nativeRun(handle, inputBuffers, positions(inputBuffers), lengths(inputBuffers), outputBuffers,
        positions(outputBuffers), lengths(outputBuffers));
  }

  /** Runs once on float32 inputs and returns the float32 outputs (copied through direct buffers). */
  public float[][] run(float[]... inputArrays) throws AdrenoException {
    if (inputArrays.length != inputs.size()) {
      throw new AdrenoException(1, "the model takes " + inputs.size() + " inputs, not " + inputArrays.length);
    }
    ByteBuffer[] in = new ByteBuffer[inputs.size()];
    for (int i = 0; i < in.length; ++i) {
      requireFloat32(inputs.get(i));
      in[i] = direct(4L * inputArrays[i].length);
      in[i].asFloatBuffer().put(inputArrays[i]);
    }
    ByteBuffer[] out = new ByteBuffer[outputs.size()];
    for (int i = 0; i < out.length; ++i) {
      requireFloat32(outputs.get(i));
      out[i] = direct(outputs.get(i).bytes);
    }
    run(in, out);
    float[][] result = new float[out.length][];
    for (int i = 0; i < out.length; ++i) {
      FloatBuffer values = out[i].asFloatBuffer();
      result[i] = new float[values.remaining()];
      values.get(result[i]);
    }
    return result;
  }

  /** Releases the model; a second close does nothing. */
  @Override
  public void close() throws AdrenoException {
    if (closed) {
      return;
    }
    closed = true;
    nativeClose(handle);
  }

  private List<TensorInfo> ports(boolean inputPorts) throws AdrenoException {
    List<TensorInfo> ports = new ArrayList<>();
    int count = nativeCount(handle, inputPorts);
    for (int i = 0; i < count; ++i) {
      ports.add(nativeInfo(handle, inputPorts, i));
    }
    return Collections.unmodifiableList(ports);
  }

  private static void requireFloat32(TensorInfo port) throws AdrenoException {
    if (!port.dtype.equals("float32")) {
      throw new AdrenoException(1, port.name + " is " + port.dtype + ": run it with ByteBuffers");
    }
  }

  private static ByteBuffer direct(long bytes) {
    return ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.nativeOrder());
  }

  private static int[] positions(ByteBuffer[] buffers) {
    int[] at = new int[buffers == null ? 0 : buffers.length];
    for (int i = 0; i < at.length; ++i) {
      at[i] = buffers[i] == null ? 0 : buffers[i].position();
    }
    return at;
  }

  private static int[] lengths(ByteBuffer[] buffers) {
    int[] n = new int[buffers == null ? 0 : buffers.length];
    for (int i = 0; i < n.length; ++i) {
      n[i] = buffers[i] == null ? 0 : buffers[i].remaining();
    }
    return n;
  }

  private static native long nativeOpen(String dir, int deviceIndex, String deviceName, String blobPath,
      boolean writeBlob, int weightThreads, String pluginPath) throws AdrenoException;

  private static native int nativeCount(long handle, boolean inputs) throws AdrenoException;

  private static native TensorInfo nativeInfo(long handle, boolean inputs, int index) throws AdrenoException;

  private static native void nativeRun(long handle, ByteBuffer[] inputs, int[] inputPositions, int[] inputLengths,
      ByteBuffer[] outputs, int[] outputPositions, int[] outputLengths) throws AdrenoException;

  private static native void nativeClose(long handle) throws AdrenoException;

  private static native int nativeShapeSetCount(long handle) throws AdrenoException;

  private static native int nativeSelectedShapeSet(long handle) throws AdrenoException;

  private static native void nativeSelectShapes(long handle, long[][] shapes) throws AdrenoException;
}
