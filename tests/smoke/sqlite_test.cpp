// The tuning log's SQLite layer: a WAL database file that round-trips rows.
#include "db/sqlite_db.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kiln::db {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at the end of the test.
class SqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln_sqlite_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  fs::path dir_;
};

TEST_F(SqliteTest, OpensInWalModeAndRoundTripsARow) {
  std::string path = (dir_ / "tuning.db").string();
  {
    Database db(path);
    {
      Statement mode = db.prepare("PRAGMA journal_mode");
      ASSERT_TRUE(mode.step());
      EXPECT_EQ(mode.column_text(0), "wal");
      Statement fk = db.prepare("PRAGMA foreign_keys");
      ASSERT_TRUE(fk.step());
      EXPECT_EQ(fk.column_int64(0), 1);
    }

    db.exec(
        "CREATE TABLE record (id INTEGER PRIMARY KEY, workload TEXT NOT NULL, "
        "cost REAL, config BLOB, note TEXT)");
    Transaction tx(db);
    Statement insert = db.prepare("INSERT INTO record (workload, cost, config, note) VALUES (?, ?, ?, ?)");
    const unsigned char config[] = {1, 0, 255};
    insert.bind(1, "conv2d:abc123").bind(2, 1.25e-3).bind_blob(3, config, sizeof config);
    insert.bind_null(4);
    insert.run();
    EXPECT_EQ(db.changes(), 1);
    EXPECT_EQ(db.last_insert_rowid(), 1);
    tx.commit();
  }
  EXPECT_TRUE(fs::exists(path));

  Database reopened(path);
  Statement select = reopened.prepare("SELECT workload, cost, config, note FROM record WHERE id = ?");
  select.bind(1, 1);
  ASSERT_TRUE(select.step());
  EXPECT_EQ(select.column_text(0), "conv2d:abc123");
  EXPECT_DOUBLE_EQ(select.column_double(1), 1.25e-3);
  EXPECT_EQ(select.column_blob(2), (std::vector<uint8_t>{1, 0, 255}));
  EXPECT_TRUE(select.column_is_null(3));
  EXPECT_FALSE(select.step());
}

TEST_F(SqliteTest, UncommittedTransactionRollsBack) {
  Database db((dir_ / "rollback.db").string());
  db.exec("CREATE TABLE t (x INTEGER)");
  {
    Transaction tx(db);
    db.exec("INSERT INTO t VALUES (1)");
  }
  Statement count = db.prepare("SELECT count(*) FROM t");
  ASSERT_TRUE(count.step());
  EXPECT_EQ(count.column_int64(0), 0);
}

TEST_F(SqliteTest, ErrorsCarrySqlitesMessage) {
  Database db((dir_ / "errors.db").string());
  try {
    db.prepare("SELECT * FROM missing_table");
    FAIL() << "expected DbError";
  } catch (const DbError &e) {
    EXPECT_NE(std::string(e.what()).find("no such table: missing_table"), std::string::npos) << e.what();
  }

  db.exec("CREATE TABLE parent (id INTEGER PRIMARY KEY)");
  db.exec("CREATE TABLE child (parent_id INTEGER REFERENCES parent(id))");
  EXPECT_THROW(db.exec("INSERT INTO child VALUES (42)"), DbError);  // foreign keys are on
  // TuningDb turns what a user can act on into TuningDbError; a raw SQLite failure is internal.
  EXPECT_THROW(db.exec("INSERT INTO child VALUES (43)"), kiln::InternalError);

  EXPECT_THROW(Database((dir_ / "no_such_dir" / "x.db").string()), DbError);
}

}  // namespace
}  // namespace kiln::db
