// Whole files in and out, and the checks that a path a run will write to can
// take the file, made before the run starts: a run that trained for an hour
// must not then find that its --save is a file or its log's folder is gone.
// Every failure is an fsdpc::Error naming the option and the path.
#pragma once

#include <string>

namespace fsdpc {

// The whole file; fsdpc::Error naming `path` if it is a folder or unreadable.
std::string read_file(const std::string& path);

// Writes `text` to a sibling temporary file and renames it over `path`, so
// a reader never sees a partial file; the temporary is removed on failure.
void write_file_atomically(const std::string& path, const std::string& text);

// `option` PATH names a file this run will create or replace: PATH is not a
// folder, and its folder exists and is writable.
void check_writable_file(const std::string& option, const std::string& path);
// `option` PATH names a folder this run will write into (creating it and its
// parents if needed): PATH is a folder or nothing, and the nearest existing
// ancestor is a writable folder.
void check_writable_folder(const std::string& option, const std::string& path);

}  // namespace fsdpc
