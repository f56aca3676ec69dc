// The one recogniser of a fraglab metadata line (metadata_line in include/fraglab/sweep.hpp):
// sweep results files (sweep_meta.cpp) and maxbatch results files (maxbatch_shards.cpp) both open
// with one, and every reader asks here which kind it is, so a file of one command given to the
// other is named as such instead of being read as rows.
#include "fraglab/sweep.hpp"

namespace fraglab {

MetadataLine metadata_line(std::string_view line, ResultsFormat format) {
  std::string_view json = line;
  if (format == ResultsFormat::Csv) {
    // In CSV the metadata is a comment: a header or row never starts with "# ".
    if (!json.starts_with(kCsvMetaPrefix)) return {};
    json.remove_prefix(kCsvMetaPrefix.size());
  }
  // Rows start with {"trace": ...; each metadata object with its kind's version key.
  if (json.starts_with("{\"fraglab_sweep\"")) return {MetadataKind::Sweep, json};
  if (json.starts_with("{\"fraglab_maxbatch\"")) return {MetadataKind::Maxbatch, json};
  return {};
}

}  // namespace fraglab
