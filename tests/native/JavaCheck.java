import adreno.rt.AdrenoException;
import adreno.rt.AdrenoModel;
import adreno.rt.TensorInfo;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * The Java API's check program (tests/native/test_rt_java.py): JavaCheck ARTIFACT INPUT.bin OUTPUT.bin BAD_DIR
 * runs ARTIFACT's single float32 input from INPUT.bin through float arrays and through direct ByteBuffers, checks
 * they agree, writes the first output to OUTPUT.bin, and prints one line per fact: the ports, the failure of
 * opening BAD_DIR, and the failures of a run after close.
 */
public class JavaCheck {
  public static void main(String[] args) throws IOException, AdrenoException {
    byte[] bytes = Files.readAllBytes(Paths.get(args[1]));
    float[] input = new float[bytes.length / 4];
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(input);
    AdrenoModel kept;
    try (AdrenoModel model = AdrenoModel.open(new File(args[0]), new AdrenoModel.Options().weightThreads(1))) {
      kept = model;
      for (TensorInfo port : model.inputs()) System.out.println("input " + port);
      for (TensorInfo port : model.outputs()) System.out.println("output " + port);
      float[][] outputs = model.run(input);
      ByteBuffer in = ByteBuffer.allocateDirect(bytes.length).order(ByteOrder.nativeOrder());
      in.asFloatBuffer().put(input);
      ByteBuffer out = ByteBuffer.allocateDirect((int) model.outputs().get(0).bytes).order(ByteOrder.nativeOrder());
      model.run(new ByteBuffer[] {in}, new ByteBuffer[] {out});
      float[] again = new float[outputs[0].length];
      out.asFloatBuffer().get(again);
      System.out.println("buffers agree " + Arrays.equals(again, outputs[0]));
      ByteBuffer raw = ByteBuffer.allocate(4 * again.length).order(ByteOrder.LITTLE_ENDIAN);
      raw.asFloatBuffer().put(outputs[0]);
      Files.write(Paths.get(args[2]), raw.array());
    }
    try {
      kept.run(input);
    } catch (AdrenoException e) {
      System.out.println("after close " + e.code() + " " + e.getMessage());
    }
    kept.close();  // a second close does nothing
    try (AdrenoModel bad = AdrenoModel.open(new File(args[3]), null)) {
      System.out.println("opened " + bad.inputs());
    } catch (AdrenoException e) {
      System.out.println("bad artifact " + e.code() + " " + e.getMessage());
    }
  }
}
