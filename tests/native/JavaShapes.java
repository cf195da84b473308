import adreno.rt.AdrenoException;
import adreno.rt.AdrenoModel;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * The Java API's shape-set check program (tests/native/test_rt_java.py): JavaShapes ARTIFACT IO_DIR WIDTH... opens
 * ARTIFACT (one float32 input of shape 1x3x8xWIDTH in each set), and for each WIDTH selects that shape, runs
 * IO_DIR/w<WIDTH>.bin and writes the first output to IO_DIR/w<WIDTH>.out; prints the set count, each selection's
 * set and input, and the failure of a width given as "no:WIDTH".
 */
public class JavaShapes {
  public static void main(String[] args) throws IOException, AdrenoException {
    try (AdrenoModel model = AdrenoModel.open(new File(args[0]), new AdrenoModel.Options().weightThreads(1))) {
      System.out.println("sets " + model.shapeSetCount() + " selected " + model.selectedShapeSet());
      for (int i = 2; i < args.length; ++i) {
        boolean refused = args[i].startsWith("no:");
        long width = Long.parseLong(refused ? args[i].substring(3) : args[i]);
        try {
          model.selectShapes(new long[] {1, 3, 8, width});
        } catch (AdrenoException e) {
          System.out.println("refused " + e.code() + " " + e.getMessage() + " selected " + model.selectedShapeSet());
          continue;
        }
        System.out.println("selected " + model.selectedShapeSet() + " input " + model.inputs().get(0));
        byte[] bytes = Files.readAllBytes(Paths.get(args[1], "w" + width + ".bin"));
        float[] input = new float[bytes.length / 4];
        ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(input);
        float[] output = model.run(input)[0];
        ByteBuffer raw = ByteBuffer.allocate(4 * output.length).order(ByteOrder.LITTLE_ENDIAN);
        raw.asFloatBuffer().put(output);
        Files.write(Paths.get(args[1], "w" + width + ".out"), raw.array());
      }
    }
  }
}
