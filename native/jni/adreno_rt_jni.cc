// The JNI half of the Java API (native/java/adreno/rt/AdrenoModel.java): each native method is one call of the C
// API (adreno_rt.h), and a status other than OK becomes an adreno.rt.AdrenoException with its code and message.
// Built into libadreno_rt_jni.so, which links libadreno_rt.so; the same file is what an Android app compiles.
#include <jni.h>

#include <string>
#include <vector>

#include "../rt/adreno_rt.h"

namespace {

// Throws the Java exception for a failed status; true when it did (the caller returns at once).
bool Failed(JNIEnv* env, adreno_rt_status status) {
  if (status.code == ADRENO_RT_OK) return false;
  jclass type = env->FindClass("adreno/rt/AdrenoException");
  if (type == nullptr) return true;  // NoClassDefFoundError is pending
  jmethodID make = env->GetMethodID(type, "<init>", "(ILjava/lang/String;)V");
  jstring message = env->NewStringUTF(status.message);
  jobject error = env->NewObject(type, make, static_cast<jint>(status.code), message);
  if (error != nullptr) env->Throw(static_cast<jthrowable>(error));
  return true;
}

bool Invalid(JNIEnv* env, const std::string& message) {
  return Failed(env, adreno_rt_status{ADRENO_RT_INVALID_ARGUMENT, message.c_str()});
}

adreno_rt_model* Model(jlong handle) { return reinterpret_cast<adreno_rt_model*>(static_cast<uintptr_t>(handle)); }

// A Java string for the duration of a call (NULL for a null reference).
class Utf {
 public:
  Utf(JNIEnv* env, jstring text)
      : env_(env), text_(text), chars_(text ? env->GetStringUTFChars(text, nullptr) : nullptr) {}
  ~Utf() {
    if (chars_ != nullptr) env_->ReleaseStringUTFChars(text_, chars_);
  }
  Utf(const Utf&) = delete;
  Utf& operator=(const Utf&) = delete;
  const char* get() const { return chars_; }

 private:
  JNIEnv* env_;
  jstring text_;
  const char* chars_;
};

// The direct buffers' memory, each from its position for its length; false (an exception pending) when one is not
// a direct buffer.
template <typename Span>
bool Spans(JNIEnv* env, jobjectArray buffers, jintArray positions, jintArray lengths, const char* which,
           std::vector<Span>* spans) {
  jsize count = buffers ? env->GetArrayLength(buffers) : 0;
  std::vector<jint> at(count), size(count);
  if (count > 0) {
    env->GetIntArrayRegion(positions, 0, count, at.data());
    env->GetIntArrayRegion(lengths, 0, count, size.data());
  }
  for (jsize i = 0; i < count; ++i) {
    jobject buffer = env->GetObjectArrayElement(buffers, i);
    char* base = buffer ? static_cast<char*>(env->GetDirectBufferAddress(buffer)) : nullptr;
    if (base == nullptr) {
      return !Invalid(env, std::string(which) + " " + std::to_string(i) + " is not a direct ByteBuffer");
    }
    spans->push_back({base + at[i], static_cast<size_t>(size[i])});
  }
  return true;
}

}  // namespace

extern "C" {

JNIEXPORT jlong JNICALL Java_adreno_rt_AdrenoModel_nativeOpen(JNIEnv* env, jclass, jstring dir, jint device_index,
                                                              jstring device_name, jstring blob_path,
                                                              jboolean write_blob, jint weight_threads,
                                                              jstring plugin_path) {
  Utf path(env, dir), name(env, device_name), blob(env, blob_path), plugin(env, plugin_path);
  adreno_rt_options options;
  adreno_rt_options_init(&options);
  options.device_index = device_index;
  options.device_name = name.get();
  options.blob_path = blob.get();
  options.write_blob = write_blob ? 1 : 0;
  options.weight_threads = weight_threads;
  options.plugin_path = plugin.get();
  adreno_rt_model* model = nullptr;
  if (Failed(env, adreno_rt_open(path.get(), &options, &model))) return 0;
  return static_cast<jlong>(reinterpret_cast<uintptr_t>(model));
}

JNIEXPORT jint JNICALL Java_adreno_rt_AdrenoModel_nativeCount(JNIEnv* env, jclass, jlong handle, jboolean inputs) {
  size_t count = 0;
  if (Failed(env, inputs ? adreno_rt_input_count(Model(handle), &count)
                         : adreno_rt_output_count(Model(handle), &count))) {
    return 0;
  }
  return static_cast<jint>(count);
}

JNIEXPORT jobject JNICALL Java_adreno_rt_AdrenoModel_nativeInfo(JNIEnv* env, jclass, jlong handle, jboolean inputs,
                                                                jint index) {
  adreno_rt_tensor_info info;
  if (Failed(env, inputs ? adreno_rt_input_info(Model(handle), static_cast<size_t>(index), &info)
                         : adreno_rt_output_info(Model(handle), static_cast<size_t>(index), &info))) {
    return nullptr;
  }
  jlongArray shape = env->NewLongArray(info.ndim);
  if (shape == nullptr) return nullptr;
  std::vector<jlong> dims(info.shape, info.shape + info.ndim);
  env->SetLongArrayRegion(shape, 0, info.ndim, dims.data());
  jclass type = env->FindClass("adreno/rt/TensorInfo");
  if (type == nullptr) return nullptr;
  jmethodID make = env->GetMethodID(type, "<init>", "(Ljava/lang/String;Ljava/lang/String;[JJ)V");
  return env->NewObject(type, make, env->NewStringUTF(info.name), env->NewStringUTF(info.dtype_name), shape,
                        static_cast<jlong>(info.bytes));
}

JNIEXPORT void JNICALL Java_adreno_rt_AdrenoModel_nativeRun(JNIEnv* env, jclass, jlong handle, jobjectArray inputs,
                                                            jintArray input_positions, jintArray input_lengths,
                                                            jobjectArray outputs, jintArray output_positions,
                                                            jintArray output_lengths) {
  std::vector<adreno_rt_view> in;
  std::vector<adreno_rt_buffer> out;
  if (!Spans(env, inputs, input_positions, input_lengths, "input", &in) ||
      !Spans(env, outputs, output_positions, output_lengths, "output", &out)) {
    return;
  }
  Failed(env, adreno_rt_run(Model(handle), in.data(), in.size(), out.data(), out.size()));
}

JNIEXPORT void JNICALL Java_adreno_rt_AdrenoModel_nativeClose(JNIEnv* env, jclass, jlong handle) {
  Failed(env, adreno_rt_close(Model(handle)));
}

JNIEXPORT jint JNICALL Java_adreno_rt_AdrenoModel_nativeShapeSetCount(JNIEnv* env, jclass, jlong handle) {
  size_t count = 0;
  if (Failed(env, adreno_rt_shape_set_count(Model(handle), &count))) return 0;
  return static_cast<jint>(count);
}

JNIEXPORT jint JNICALL Java_adreno_rt_AdrenoModel_nativeSelectedShapeSet(JNIEnv* env, jclass, jlong handle) {
  size_t set = 0;
  if (Failed(env, adreno_rt_selected_shape_set(Model(handle), &set))) return 0;
  return static_cast<jint>(set);
}

JNIEXPORT void JNICALL Java_adreno_rt_AdrenoModel_nativeSelectShapes(JNIEnv* env, jclass, jlong handle,
                                                                     jobjectArray shapes) {
  jsize count = shapes ? env->GetArrayLength(shapes) : 0;
  std::vector<std::vector<int64_t>> dims(count);
  for (jsize i = 0; i < count; ++i) {
    jlongArray shape = static_cast<jlongArray>(env->GetObjectArrayElement(shapes, i));
    if (shape == nullptr) {
      Invalid(env, "shape " + std::to_string(i) + " is null");
      return;
    }
    std::vector<jlong> values(env->GetArrayLength(shape));
    env->GetLongArrayRegion(shape, 0, static_cast<jsize>(values.size()), values.data());
    dims[i].assign(values.begin(), values.end());
    env->DeleteLocalRef(shape);
  }
  std::vector<adreno_rt_shape> given;
  for (const std::vector<int64_t>& shape : dims) given.push_back({static_cast<int32_t>(shape.size()), shape.data()});
  Failed(env, adreno_rt_select_shapes(Model(handle), given.data(), given.size()));
}

}  // extern "C"
