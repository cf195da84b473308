#include "kernel_contract.h"

#include <zlib.h>

#include <map>
#include <stdexcept>
#include <vector>

#include "atomic_file.h"
#include "integrity.h"

namespace adreno_harness {

namespace {

const char kMark[] = "// adreno-contract: ";  // adreno.artifact.kernel_contract.MARK

struct ArgSpec {
  std::vector<int64_t> shape;
  std::string dtype, scope;

  bool operator==(const ArgSpec& other) const {
    return shape == other.shape && dtype == other.dtype && scope == other.scope;
  }
  std::string Text() const {
    std::string text = dtype + " [";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
    return text + "] " + scope;
  }
};

ArgSpec ReadArg(const json::Object& spec, const std::string& where) {
  return {AsShape(Field(spec, "shape", where), where + " \"shape\""), StringField(spec, "dtype", where),
          StringField(spec, "scope", where)};
}

// The contract's argument specs of `program`, from its source file.
std::vector<ArgSpec> ContractArgs(const std::string& artifact, const std::string& program, const json::Object& plan,
                                  const json::Object& manifest) {
  const std::string rel = StringField(ObjectField(plan, "programs", "plan.json"), program.c_str(),
                                      "plan.json programs");
  if (rel.find("..") != std::string::npos || rel.empty() || rel[0] == '/') {
    throw std::runtime_error("plan.json programs " + program + ": path " + rel + " leads outside the artifact");
  }
  const std::string bytes = ReadFile(artifact + "/" + rel);
  VerifyListedFile(manifest, rel, bytes.data(), bytes.size());
  const std::string line = FirstGzipLine(bytes, rel);
  if (line.compare(0, sizeof(kMark) - 1, kMark) != 0) {
    throw std::runtime_error(rel + " has no contract line (an older adreno, or edited); recompile the model");
  }
  const std::string where = rel + " contract";
  std::vector<ArgSpec> args;
  for (const json::Value& arg : ArrayField(ParseJsonObject(line.substr(sizeof(kMark) - 1), where), "args", where)) {
    args.push_back(ReadArg(AsObject(arg, where + " argument"), where + " argument"));
  }
  return args;
}

}  // namespace

std::string FirstGzipLine(const std::string& bytes, const std::string& where) {
  constexpr size_t kMaxLine = 1 << 20;
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error(where + ": zlib did not start");
  std::string out(kMaxLine, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(std::min<size_t>(bytes.size(), UINT32_MAX));
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int status = Z_OK;
  size_t newline = std::string::npos;
  while (status == Z_OK && newline == std::string::npos && stream.avail_out > 0) {
    const size_t before = out.size() - stream.avail_out;
    status = inflate(&stream, Z_NO_FLUSH);
    newline = out.find('\n', before);
    if (newline >= out.size() - stream.avail_out) newline = std::string::npos;
  }
  inflateEnd(&stream);
  if (status != Z_OK && status != Z_STREAM_END) throw std::runtime_error(where + " is not gzip-compressed text");
  if (newline == std::string::npos) throw std::runtime_error(where + ": its first line is not whole within 1 MiB");
  return out.substr(0, newline);
}

void CheckKernelContracts(const std::string& artifact, const json::Object& plan, const json::Object& manifest) {
  const json::Object tensors = ObjectField(plan, "tensors", "plan.json");
  std::map<std::string, std::vector<ArgSpec>> contracts;  // program -> its arguments, each file read once
  const json::Array steps = ArrayField(plan, "steps", "plan.json");
  for (size_t index = 0; index < steps.size(); ++index) {
    const std::string where = "plan.json step " + std::to_string(index);
    const json::Object step = AsObject(steps[index], where);
    const std::string program = StringField(step, "program", where);
    auto found = contracts.find(program);
    if (found == contracts.end()) {
      found = contracts.emplace(program, ContractArgs(artifact, program, plan, manifest)).first;
    }
    const std::vector<ArgSpec>& wanted = found->second;
    const json::Array args = ArrayField(step, "args", where);
    if (args.size() != wanted.size()) {
      throw std::runtime_error(where + " names " + std::to_string(args.size()) + " tensors, its kernels were lowered "
                               "for " + std::to_string(wanted.size()) + "; recompile the model");
    }
    for (size_t position = 0; position < args.size(); ++position) {
      const std::string name = AsString(args[position], where + " argument");
      const ArgSpec given =
          ReadArg(ObjectField(tensors, name.c_str(), "plan.json tensors"), "plan.json tensor " + name);
      if (!(given == wanted[position])) {
        throw std::runtime_error(where + " (" + program + "): argument " + std::to_string(position) + " is tensor " +
                                 name + " " + given.Text() + ", its kernel was lowered for " +
                                 wanted[position].Text() + "; recompile the model");
      }
    }
  }
}

}  // namespace adreno_harness
