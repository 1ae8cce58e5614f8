#include "gguf/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"

namespace ember {

namespace {

constexpr uint32_t kMaxNesting = 8;          // arrays of arrays deeper than this are refused
constexpr uint64_t kMaxNameLength = 4096;    // keys and tensor names
constexpr uint32_t kMaxDims = 4;

[[noreturn]] void format_error(const std::string& what) { fail(EMBER_ERR_FORMAT, what); }

uint64_t scalar_size(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::BOOL: return 1;
        case GGUFType::UINT16: case GGUFType::INT16: return 2;
        case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::FLOAT32: return 4;
        case GGUFType::UINT64: case GGUFType::INT64: case GGUFType::FLOAT64: return 8;
        default: return 0;  // string, array: variable
    }
}

bool valid_value_type(uint32_t t) { return t <= (uint32_t)GGUFType::FLOAT64; }

// Bounds-checked cursor over the mapping; every read is checked against the end.
class Cursor {
public:
    Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}
    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    void need(uint64_t n, const char* what) const {
        if (n > remaining())
            format_error(std::string("file is truncated: ") + what + " needs " + std::to_string(n) +
                         " bytes at offset " + std::to_string(pos_) + " but only " +
                         std::to_string(remaining()) + " remain");
    }
    template <typename T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string_view read_string(const char* what, uint64_t max_len = UINT64_MAX) {
        const uint64_t len = read<uint64_t>(what);
        if (len > max_len)
            format_error(std::string(what) + " is " + std::to_string(len) + " bytes long (limit " +
                         std::to_string(max_len) + ")");
        need(len, what);
        std::string_view s(reinterpret_cast<const char*>(base_ + pos_), (size_t)len);
        pos_ += len;
        return s;
    }
    const uint8_t* skip(uint64_t n, const char* what) {
        need(n, what);
        const uint8_t* p = base_ + pos_;
        pos_ += n;
        return p;
    }

private:
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
};

void read_value(Cursor& c, GGUFType type, GGUFValue& v, uint32_t depth, const std::string& key);

void read_array(Cursor& c, GGUFValue& v, uint32_t depth, const std::string& key) {
    if (depth >= kMaxNesting) format_error("key '" + key + "': arrays nested too deeply");
    const uint32_t et = c.read<uint32_t>("array element type");
    if (!valid_value_type(et))
        format_error("key '" + key + "': unknown array element type " + std::to_string(et));
    v.elem_type = (GGUFType)et;
    v.n_elems = c.read<uint64_t>("array length");
    const uint64_t es = scalar_size(v.elem_type);
    if (es > 0) {
        if (v.n_elems > c.remaining() / es)
            format_error("key '" + key + "': array of " + std::to_string(v.n_elems) +
                         " elements is larger than the file");
        v.array_data = c.skip(v.n_elems * es, "array data");
    } else if (v.elem_type == GGUFType::STRING) {
        if (v.n_elems > c.remaining() / 8)  // each string needs at least its length field
            format_error("key '" + key + "': array of " + std::to_string(v.n_elems) +
                         " strings is larger than the file");
        v.strings.reserve((size_t)v.n_elems);
        for (uint64_t i = 0; i < v.n_elems; ++i) v.strings.push_back(c.read_string("array string"));
    } else {  // nested arrays
        if (v.n_elems > c.remaining() / 12)
            format_error("key '" + key + "': array of " + std::to_string(v.n_elems) +
                         " arrays is larger than the file");
        v.nested.resize((size_t)v.n_elems);
        for (uint64_t i = 0; i < v.n_elems; ++i) {
            v.nested[i].type = GGUFType::ARRAY;
            read_array(c, v.nested[i], depth + 1, key);
        }
    }
}

void read_value(Cursor& c, GGUFType type, GGUFValue& v, uint32_t depth, const std::string& key) {
    v.type = type;
    switch (type) {
        case GGUFType::UINT8: v.u = c.read<uint8_t>("u8"); v.i = (int64_t)v.u; break;
        case GGUFType::INT8: v.i = c.read<int8_t>("i8"); break;
        case GGUFType::UINT16: v.u = c.read<uint16_t>("u16"); v.i = (int64_t)v.u; break;
        case GGUFType::INT16: v.i = c.read<int16_t>("i16"); break;
        case GGUFType::UINT32: v.u = c.read<uint32_t>("u32"); v.i = (int64_t)v.u; break;
        case GGUFType::INT32: v.i = c.read<int32_t>("i32"); break;
        case GGUFType::UINT64: v.u = c.read<uint64_t>("u64"); v.i = (int64_t)v.u; break;
        case GGUFType::INT64: v.i = c.read<int64_t>("i64"); break;
        case GGUFType::FLOAT32: v.f = c.read<float>("f32"); break;
        case GGUFType::FLOAT64: v.f = c.read<double>("f64"); break;
        case GGUFType::BOOL: {
            uint8_t b = c.read<uint8_t>("bool");
            if (b > 1) format_error("key '" + key + "': bool value " + std::to_string(b));
            v.b = b != 0;
            v.i = b;
            break;
        }
        case GGUFType::STRING: v.str = c.read_string("string value"); break;
        case GGUFType::ARRAY: read_array(c, v, depth, key); break;
    }
    if (type == GGUFType::INT8 || type == GGUFType::INT16 || type == GGUFType::INT32 ||
        type == GGUFType::INT64)
        v.u = (uint64_t)v.i;
    if (v.is_integer()) v.f = (type == GGUFType::UINT64) ? (double)v.u : (double)v.i;
}

// overflow-checked a*b
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
    if (a != 0 && b > UINT64_MAX / a) return true;
    *out = a * b;
    return false;
}

void json_escape(std::string& out, std::string_view s) {
    out += '"';
    size_t i = 0;
    while (i < s.size()) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') { out += "\\\""; ++i; continue; }
        if (ch == '\\') { out += "\\\\"; ++i; continue; }
        if (ch < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
            out += buf;
            ++i;
            continue;
        }
        if (ch < 0x80) { out += (char)ch; ++i; continue; }
        // pass valid UTF-8 through, replace invalid bytes with U+FFFD
        int len = (ch & 0xe0) == 0xc0 ? 2 : (ch & 0xf0) == 0xe0 ? 3 : (ch & 0xf8) == 0xf0 ? 4 : 0;
        bool ok = len > 0 && i + (size_t)len <= s.size();
        for (int k = 1; ok && k < len; ++k) ok = ((unsigned char)s[i + k] & 0xc0) == 0x80;
        if (ok) {
            out.append(s.data() + i, (size_t)len);
            i += (size_t)len;
        } else {
            out += "\xef\xbf\xbd";
            ++i;
        }
    }
    out += '"';
}

void json_number(std::string& out, double f, bool single) {
    if (std::isnan(f)) { out += "NaN"; return; }
    if (std::isinf(f)) { out += f > 0 ? "Infinity" : "-Infinity"; return; }
    char buf[40];
    std::snprintf(buf, sizeof(buf), single ? "%.9g" : "%.17g", f);
    out += buf;
}

void json_scalar_at(std::string& out, GGUFType t, const uint8_t* p) {
    char buf[32];
    switch (t) {
        case GGUFType::UINT8: std::snprintf(buf, sizeof(buf), "%u", (unsigned)*p); break;
        case GGUFType::INT8: std::snprintf(buf, sizeof(buf), "%d", (int)(int8_t)*p); break;
        case GGUFType::BOOL: std::snprintf(buf, sizeof(buf), "%s", *p ? "true" : "false"); break;
        case GGUFType::UINT16: { uint16_t v; std::memcpy(&v, p, 2); std::snprintf(buf, sizeof(buf), "%u", (unsigned)v); break; }
        case GGUFType::INT16: { int16_t v; std::memcpy(&v, p, 2); std::snprintf(buf, sizeof(buf), "%d", (int)v); break; }
        case GGUFType::UINT32: { uint32_t v; std::memcpy(&v, p, 4); std::snprintf(buf, sizeof(buf), "%lu", (unsigned long)v); break; }
        case GGUFType::INT32: { int32_t v; std::memcpy(&v, p, 4); std::snprintf(buf, sizeof(buf), "%ld", (long)v); break; }
        case GGUFType::UINT64: { uint64_t v; std::memcpy(&v, p, 8); std::snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v); break; }
        case GGUFType::INT64: { int64_t v; std::memcpy(&v, p, 8); std::snprintf(buf, sizeof(buf), "%lld", (long long)v); break; }
        case GGUFType::FLOAT32: { float v; std::memcpy(&v, p, 4); json_number(out, v, true); return; }
        case GGUFType::FLOAT64: { double v; std::memcpy(&v, p, 8); json_number(out, v, false); return; }
        default: buf[0] = 0; break;
    }
    out += buf;
}

void to_json_into(std::string& out, const GGUFValue& v) {
    switch (v.type) {
        case GGUFType::STRING: json_escape(out, v.str); return;
        case GGUFType::BOOL: out += v.b ? "true" : "false"; return;
        case GGUFType::FLOAT32: json_number(out, v.f, true); return;
        case GGUFType::FLOAT64: json_number(out, v.f, false); return;
        case GGUFType::ARRAY: {
            out += '[';
            if (v.elem_type == GGUFType::STRING) {
                for (size_t i = 0; i < v.strings.size(); ++i) {
                    if (i) out += ',';
                    json_escape(out, v.strings[i]);
                }
            } else if (v.elem_type == GGUFType::ARRAY) {
                for (size_t i = 0; i < v.nested.size(); ++i) {
                    if (i) out += ',';
                    to_json_into(out, v.nested[i]);
                }
            } else {
                const uint64_t es = scalar_size(v.elem_type);
                for (uint64_t i = 0; i < v.n_elems; ++i) {
                    if (i) out += ',';
                    json_scalar_at(out, v.elem_type, v.array_data + i * es);
                }
            }
            out += ']';
            return;
        }
        default: {
            char buf[32];
            if (v.type == GGUFType::UINT64 || v.type == GGUFType::UINT32 ||
                v.type == GGUFType::UINT16 || v.type == GGUFType::UINT8)
                std::snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v.u);
            else
                std::snprintf(buf, sizeof(buf), "%lld", (long long)v.i);
            out += buf;
        }
    }
}

}  // namespace

bool GGUFValue::is_integer() const {
    switch (type) {
        case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::UINT16: case GGUFType::INT16:
        case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::UINT64: case GGUFType::INT64:
            return true;
        default: return false;
    }
}

bool GGUFValue::is_number() const {
    return is_integer() || type == GGUFType::FLOAT32 || type == GGUFType::FLOAT64;
}

std::unique_ptr<GGUFFile> GGUFFile::open(const std::string& path) {
    std::unique_ptr<GGUFFile> g(new GGUFFile());
    g->file_ = MappedFile::open(path);
    g->base_ = g->file_->data();
    g->size_ = g->file_->size();
    g->parse();
    return g;
}

std::unique_ptr<GGUFFile> GGUFFile::from_memory(const uint8_t* data, uint64_t size) {
    std::unique_ptr<GGUFFile> g(new GGUFFile());
    g->base_ = data;
    g->size_ = size;
    g->parse();
    return g;
}

void GGUFFile::parse() {
    if (size_ < 4 || base_ == nullptr) format_error("file is empty or too small to be a GGUF file");
    if (std::memcmp(base_, "GGUF", 4) != 0) {
        std::string got;
        for (int i = 0; i < 4; ++i) {
            char c = (char)base_[i];
            got += (c >= 32 && c < 127) ? c : '?';
        }
        format_error("not a GGUF file (magic is '" + got + "', expected 'GGUF')");
    }
    Cursor c(base_, size_);
    c.skip(4, "magic");
    version_ = c.read<uint32_t>("version");
    if (version_ == 1) fail(EMBER_ERR_UNSUPPORTED, "GGUF version 1 is obsolete; convert the model again");
    if (version_ != 2 && version_ != 3)
        fail(EMBER_ERR_UNSUPPORTED, "unsupported GGUF version " + std::to_string(version_));
    const uint64_t n_tensors = c.read<uint64_t>("tensor count");
    const uint64_t n_kv = c.read<uint64_t>("metadata count");
    // Each key-value needs at least 8 (key length) + 4 (type) + 1 bytes, each tensor info 8+4+8+4+8.
    if (n_kv > c.remaining() / 13)
        format_error("metadata count " + std::to_string(n_kv) + " is larger than the file allows");
    if (n_tensors > c.remaining() / 32)
        format_error("tensor count " + std::to_string(n_tensors) + " is larger than the file allows");

    kv_.reserve((size_t)n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
        std::string key(c.read_string("metadata key", kMaxNameLength));
        if (key.empty()) format_error("metadata key #" + std::to_string(i) + " is empty");
        const uint32_t t = c.read<uint32_t>("metadata value type");
        if (!valid_value_type(t))
            format_error("key '" + key + "' has unknown value type " + std::to_string(t));
        GGUFValue v;
        read_value(c, (GGUFType)t, v, 0, key);
        if (kv_index_.count(key)) format_error("duplicate metadata key '" + key + "'");
        kv_index_[key] = kv_.size();
        kv_.emplace_back(std::move(key), std::move(v));
    }

    if (const GGUFValue* a = find("general.alignment")) {
        if (!a->is_integer() || a->type == GGUFType::INT8 || a->type == GGUFType::INT16 ||
            a->type == GGUFType::INT32 || a->type == GGUFType::INT64 || a->i <= 0)
            format_error("general.alignment must be a positive unsigned integer");
        alignment_ = a->u;
        if ((alignment_ & (alignment_ - 1)) != 0 || alignment_ > (1u << 20))
            format_error("general.alignment " + std::to_string(alignment_) +
                         " is not a power of two up to 1 MiB");
    }

    tensors_.reserve((size_t)n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        GGUFTensorInfo ti;
        ti.name = std::string(c.read_string("tensor name", kMaxNameLength));
        const std::string who = "tensor '" + ti.name + "'";
        ti.n_dims = c.read<uint32_t>("tensor dimension count");
        if (ti.n_dims == 0 || ti.n_dims > kMaxDims)
            format_error(who + " has " + std::to_string(ti.n_dims) + " dimensions (1 to 4 allowed)");
        uint64_t n_elems = 1;
        for (uint32_t d = 0; d < ti.n_dims; ++d) {
            const uint64_t ne = c.read<uint64_t>("tensor dimension");
            if (ne == 0 || ne > (uint64_t)std::numeric_limits<int64_t>::max())
                format_error(who + " has invalid dimension " + std::to_string(d) + " = " +
                             std::to_string(ne));
            if (mul_overflows(n_elems, ne, &n_elems) ||
                n_elems > (uint64_t)std::numeric_limits<int64_t>::max())
                format_error(who + ": the product of its dimensions overflows");
            ti.ne[d] = (int64_t)ne;
        }
        ti.type = c.read<uint32_t>("tensor type");
        const DTypeInfo* tt = dtype_info(ti.type);
        if (!tt)
            fail(EMBER_ERR_UNSUPPORTED, who + " has unknown or unsupported element type " +
                                            std::to_string(ti.type));
        if (ti.ne[0] % tt->block_size != 0)
            format_error(who + ": first dimension " + std::to_string(ti.ne[0]) +
                         " is not a multiple of the " + tt->name + " block size " +
                         std::to_string(tt->block_size));
        ti.n_bytes = n_elems / (uint64_t)tt->block_size * (uint64_t)tt->block_bytes;
        ti.offset = c.read<uint64_t>("tensor offset");
        if (ti.offset % alignment_ != 0)
            format_error(who + ": data offset " + std::to_string(ti.offset) +
                         " is not aligned to " + std::to_string(alignment_));
        if (tensor_index_.count(ti.name)) format_error("duplicate tensor name '" + ti.name + "'");
        tensor_index_[ti.name] = tensors_.size();
        tensors_.push_back(std::move(ti));
    }

    // The data section starts at the next multiple of the alignment.
    const uint64_t end_of_infos = c.pos();
    data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
    if (!tensors_.empty() && data_offset_ > size_)
        format_error("file is truncated: the tensor data section starts past the end of the file");
    const uint64_t data_size = size_ > data_offset_ ? size_ - data_offset_ : 0;
    for (GGUFTensorInfo& ti : tensors_) {
        if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset)
            format_error("file is truncated: tensor '" + ti.name + "' (" +
                         std::to_string(ti.n_bytes) + " bytes at data offset " +
                         std::to_string(ti.offset) + ") extends past the end of the file");
        ti.data = base_ + data_offset_ + ti.offset;
    }
    // Overlapping tensors are a sign of a corrupt file.
    std::vector<const GGUFTensorInfo*> sorted;
    sorted.reserve(tensors_.size());
    for (const auto& t : tensors_) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(),
              [](const GGUFTensorInfo* a, const GGUFTensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < sorted.size(); ++i)
        if (sorted[i - 1]->offset + sorted[i - 1]->n_bytes > sorted[i]->offset)
            format_error("tensors '" + sorted[i - 1]->name + "' and '" + sorted[i]->name +
                         "' overlap");
}

const GGUFValue* GGUFFile::find(std::string_view key) const {
    auto it = kv_index_.find(std::string(key));
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GGUFTensorInfo* GGUFFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(std::string(name));
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

static std::string wrong_type(std::string_view key, const char* wanted, GGUFType got) {
    return "metadata key '" + std::string(key) + "' should be " + wanted + " but is " +
           GGUFFile::type_name(got);
}

std::string GGUFFile::get_string(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) format_error("missing metadata key '" + std::string(key) + "'");
    if (v->type != GGUFType::STRING) format_error(wrong_type(key, "a string", v->type));
    return std::string(v->str);
}

std::string GGUFFile::get_string_or(std::string_view key, const std::string& fallback) const {
    return find(key) ? get_string(key) : fallback;
}

int64_t GGUFFile::get_int(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) format_error("missing metadata key '" + std::string(key) + "'");
    if (!v->is_integer()) format_error(wrong_type(key, "an integer", v->type));
    if (v->type == GGUFType::UINT64 && v->u > (uint64_t)std::numeric_limits<int64_t>::max())
        format_error("metadata key '" + std::string(key) + "' is out of range");
    return v->i;
}

int64_t GGUFFile::get_int_or(std::string_view key, int64_t fallback) const {
    return find(key) ? get_int(key) : fallback;
}

double GGUFFile::get_float(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) format_error("missing metadata key '" + std::string(key) + "'");
    if (!v->is_number()) format_error(wrong_type(key, "a number", v->type));
    return v->f;
}

double GGUFFile::get_float_or(std::string_view key, double fallback) const {
    return find(key) ? get_float(key) : fallback;
}

bool GGUFFile::get_bool_or(std::string_view key, bool fallback) const {
    const GGUFValue* v = find(key);
    if (!v) return fallback;
    if (v->type == GGUFType::BOOL) return v->b;
    if (v->is_integer()) return v->i != 0;
    format_error(wrong_type(key, "a bool", v->type));
}

const std::vector<std::string_view>& GGUFFile::get_string_array(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) format_error("missing metadata key '" + std::string(key) + "'");
    if (v->type != GGUFType::ARRAY || v->elem_type != GGUFType::STRING)
        format_error("metadata key '" + std::string(key) + "' should be an array of strings");
    return v->strings;
}

std::vector<float> GGUFFile::get_float_array(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) format_error("missing metadata key '" + std::string(key) + "'");
    if (v->type != GGUFType::ARRAY ||
        (v->elem_type != GGUFType::FLOAT32 && v->elem_type != GGUFType::FLOAT64))
        format_error("metadata key '" + std::string(key) + "' should be an array of floats");
    std::vector<float> out((size_t)v->n_elems);
    for (uint64_t i = 0; i < v->n_elems; ++i) {
        if (v->elem_type == GGUFType::FLOAT32) {
            std::memcpy(&out[i], v->array_data + 4 * i, 4);
        } else {
            double d;
            std::memcpy(&d, v->array_data + 8 * i, 8);
            out[i] = (float)d;
        }
    }
    return out;
}

std::vector<int64_t> GGUFFile::get_int_array(std::string_view key) const {
    const GGUFValue* v = find(key);
    if (!v) format_error("missing metadata key '" + std::string(key) + "'");
    const uint64_t es = v->type == GGUFType::ARRAY ? scalar_size(v->elem_type) : 0;
    if (v->type != GGUFType::ARRAY || es == 0 || v->elem_type == GGUFType::FLOAT32 ||
        v->elem_type == GGUFType::FLOAT64 || v->elem_type == GGUFType::BOOL)
        format_error("metadata key '" + std::string(key) + "' should be an array of integers");
    std::vector<int64_t> out((size_t)v->n_elems);
    for (uint64_t i = 0; i < v->n_elems; ++i) {
        const uint8_t* p = v->array_data + es * i;
        switch (v->elem_type) {
            case GGUFType::UINT8: out[i] = *p; break;
            case GGUFType::INT8: out[i] = (int8_t)*p; break;
            case GGUFType::UINT16: { uint16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
            case GGUFType::INT16: { int16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
            case GGUFType::UINT32: { uint32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
            case GGUFType::INT32: { int32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
            case GGUFType::UINT64: { uint64_t x; std::memcpy(&x, p, 8); out[i] = (int64_t)x; break; }
            case GGUFType::INT64: { int64_t x; std::memcpy(&x, p, 8); out[i] = x; break; }
            default: break;
        }
    }
    return out;
}

std::string GGUFFile::to_json(const GGUFValue& v) {
    std::string out;
    to_json_into(out, v);
    return out;
}

const char* GGUFFile::type_name(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8: return "u8";
        case GGUFType::INT8: return "i8";
        case GGUFType::UINT16: return "u16";
        case GGUFType::INT16: return "i16";
        case GGUFType::UINT32: return "u32";
        case GGUFType::INT32: return "i32";
        case GGUFType::FLOAT32: return "f32";
        case GGUFType::BOOL: return "bool";
        case GGUFType::STRING: return "string";
        case GGUFType::ARRAY: return "array";
        case GGUFType::UINT64: return "u64";
        case GGUFType::INT64: return "i64";
        case GGUFType::FLOAT64: return "f64";
    }
    return "?";
}

}  // namespace ember
