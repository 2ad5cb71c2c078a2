// Reads an HdrHistogram interval log with HdrHistogram's own Java library (its
// HistogramLogReader), for harness/tests/hlog_interop.rs: one line per interval, tab-separated:
//   tag  total-count  max  then for each of p50 p90 p99 p99.9:
//   the library's getValueAtPercentile  and  the value at rank ceil(q x count)
// The second is failmode's convention (the hdrhistogram crate's), computed here by walking the
// library's recorded values, so the test can tell a different reading from a different rank.
// Run as a single-file program: java -cp HdrHistogram.jar ReadHlog.java FILE
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;
import org.HdrHistogram.HistogramLogReader;

public class ReadHlog {
    public static void main(String[] args) throws Exception {
        HistogramLogReader reader = new HistogramLogReader(args[0]);
        double[] quantiles = {0.5, 0.9, 0.99, 0.999};
        EncodableHistogram read;
        while ((read = reader.nextIntervalHistogram()) != null) {
            Histogram h = (Histogram) read;
            long n = h.getTotalCount();
            StringBuilder line = new StringBuilder();
            line.append(h.getTag()).append('\t').append(n).append('\t').append(h.getMaxValue());
            for (double q : quantiles) {
                long rank = Math.max(1, (long) Math.ceil(q * n));
                line.append('\t').append(n == 0 ? -1 : h.getValueAtPercentile(q * 100.0));
                line.append('\t').append(n == 0 ? -1 : valueAtRank(h, rank));
            }
            System.out.println(line);
        }
    }

    static long valueAtRank(Histogram h, long rank) {
        long seen = 0;
        for (HistogramIterationValue v : h.recordedValues()) {
            seen += v.getCountAddedInThisIterationStep();
            if (seen >= rank) {
                return h.highestEquivalentValue(v.getValueIteratedTo());
            }
        }
        return h.getMaxValue();
    }
}
