// .npy reading and writing: every dtype Kiln writes comes back unchanged (data, shape, dtype), and
// a malformed file is an NpyError naming it, never a crash or a huge allocation.
#include "deploy/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace kiln::deploy {
namespace {

Tensor filled(const std::vector<int64_t> &shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  auto *p = static_cast<uint8_t *>(t.data());
  for (size_t k = 0; k < t.nbytes(); ++k) p[k] = static_cast<uint8_t>(k * 7 + 1);
  if (dtype == DType::of<bool>()) {
    for (size_t k = 0; k < t.nbytes(); ++k) p[k] &= 1;
  }
  return t;
}

void expect_same(const Tensor &got, const Tensor &want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.nbytes(), want.nbytes());
  if (want.nbytes()) {
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.nbytes()), 0);
  }
}

TEST(NpyTest, RoundTripsEveryDtypeAndRank) {
  const std::vector<DType> dtypes = {DType::of<float>(),    DType::of<double>(),   DType{DType::Float, 16},
                                     DType::of<int8_t>(),   DType::of<int16_t>(),  DType::of<int32_t>(),
                                     DType::of<int64_t>(),  DType::of<uint8_t>(),  DType::of<uint16_t>(),
                                     DType::of<uint32_t>(), DType::of<uint64_t>(), DType::of<bool>()};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 3}, {1, 3, 0, 2}, {2, 3, 4, 5}};
  for (const DType &dt : dtypes) {
    for (const auto &shape : shapes) {
      SCOPED_TRACE(dt.to_string() + " rank " + std::to_string(shape.size()));
      const Tensor t = filled(shape, dt);
      const std::string bytes = to_npy(t);
      EXPECT_EQ(bytes.find('\n') % 64, 63u) << "the data starts at a multiple of 64";
      expect_same(parse_npy(bytes, "t.npy"), t);
    }
  }
}

TEST(NpyTest, RoundTripsThroughAFile) {
  test::TempDir dir;
  const Tensor t = filled({3, 4}, DType::of<float>());
  write_npy(dir.file("t.npy"), t);
  expect_same(read_npy(dir.file("t.npy")), t);
}

// A version 1.0 file with `header` (padded to 64 bytes) followed by `data_bytes` zero bytes.
std::string npy_with_header(const std::string &header, size_t data_bytes) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(data_bytes, '\0');
}

// parse_npy(bytes) must throw an NpyError naming the file and holding `needle`.
void expect_npy_error(const std::string &bytes, const std::string &needle) {
  try {
    parse_npy(bytes, "bad.npy");
    ADD_FAILURE() << "no error for: " << needle;
  } catch (const NpyError &e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bad.npy"), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "not an NpyError: " << e.what();
  }
}

TEST(NpyTest, MalformedFilesAreErrorsNamingTheFile) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(parse_npy(npy_with_header(good, 24), "good.npy").shape(), (std::vector<int64_t>{2, 3}));

  expect_npy_error("", "bad magic");
  expect_npy_error("\x89PNG\r\n\x1a\n\0\0\0\0", "bad magic");
  expect_npy_error(std::string("\x93NUMPY\x01\x00", 8), "bad magic");  // shorter than the fixed prefix
  std::string v4 = npy_with_header(good, 24);
  v4[6] = 4;
  expect_npy_error(v4, "version 4");
  expect_npy_error(npy_with_header(good, 24).substr(0, 40), "truncated .npy header");
  std::string long_header = npy_with_header(good, 24);
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  expect_npy_error(long_header, "truncated .npy header");
  std::string v2(npy_with_header(good, 0).substr(0, 10));
  v2[6] = 2;
  expect_npy_error(v2, "truncated .npy header");

  expect_npy_error(npy_with_header("{'fortran_order': False, 'shape': (2, 3), }", 24), "'descr'");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'shape': (2, 3), }", 24), "'fortran_order'");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, }", 24), "'shape'");
  expect_npy_error(npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24), "'>f4'");
  expect_npy_error(npy_with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", 48), "'<c8'");
  expect_npy_error(npy_with_header("{'descr': '', 'fortran_order': False, 'shape': (2, 3), }", 24), "not supported");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24), "Fortran");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 24),
                   "malformed shape");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 24),
                   "malformed shape");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23),
                   "holds 23 bytes of data, the header says 24");
  // A header that declares far more data than the file holds is refused before anything is allocated.
  expect_npy_error(npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000, 100000), }", 8),
                   "holds 8 bytes");
  expect_npy_error(npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (999999999999999, "
                                   "999999999999999), }",
                                   8),
                   "overflows");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1234567890123456789,), }", 8),
                   "too large");
}

TEST(NpyTest, AnEmptyArrayWithHugeExtentsParses) {
  // No elements, but the other extents' product overflows int64.
  const Tensor t = parse_npy(
      npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 999999999999999, 999999999999999), }", 0),
      "empty.npy");
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{0, 999999999999999, 999999999999999}));
  EXPECT_EQ(t.nbytes(), 0u);
}

TEST(NpyTest, MissingFileIsAnErrorNamingIt) {
  try {
    read_npy("/nonexistent/x.npy");
    FAIL() << "no error";
  } catch (const NpyError &e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.npy"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::deploy
