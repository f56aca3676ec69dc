// The one rule for commands that write a file: an existing file is not replaced unless the user
// says so (--overwrite), as sweep does, so a typo in -o never destroys earlier results.
#pragma once

#include <string>

namespace fraglab::cli {

// Throws InputError "PATH: already exists (--overwrite replaces it)" when PATH is an existing
// non-empty regular file and `overwrite` is false. "-" (stdout), devices such as /dev/null and
// empty files pass.
void refuse_overwrite(const std::string& path, bool overwrite);

}  // namespace fraglab::cli
