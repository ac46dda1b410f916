// size: the four commands' options, the run's steps and the usage errors' wording share the
// argument structs and exit codes of this file's anonymous namespace (the usage-error helpers could
// move to a file of their own).
#include "runner/cli.hpp"
#include "runner/clients.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include <CLI/CLI.hpp>
#include <asio/version.hpp>
#include <openssl/crypto.h>

#include "runner/compare.hpp"
#include "runner/measure.hpp"
#include "runner/report.hpp"
#include "runner/svg_report.hpp"
#include "runner/remote_log.hpp"
#include "runner/verify.hpp"

#ifndef VLESSBENCH_VERSION
#define VLESSBENCH_VERSION "unknown"
#endif

namespace vlessbench::runner {

namespace {

// docs/runner.md, "Exit codes", and --help list the same.
constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;
constexpr int exit_failing_path = 3;
constexpr int exit_verify_failed = 4;  // run --verify: the run's own outcome was 0
// A signal: 128 + its number (130 SIGINT, 143 SIGTERM), as shells, hyperfine and iperf3 report it.
constexpr int exit_signal_base = 128;

constexpr const char* exit_codes_help =
    "Exit codes: 0 ok; 1 route mismatches (without --allow-mismatch), every sample failed, the run aborted, "
    "verify found problems, or an I/O error; 2 usage error; 3 a path had no successful sample or more than "
    "--max-failed percent of its samples failed (named on stderr with its last error and a hint); 4 run --verify: "
    "the samples did not all verify against the daemon's log, or it could not be fetched; 130/143 "
    "interrupted by SIGINT/SIGTERM (samples so far written).";

// After the measurement, while the files are written: a second signal exits at once.
extern "C" void exit_at_once(int sig) { std::_Exit(exit_signal_base + sig); }

struct run_args {
  std::string target = "http://127.0.0.1:8080/";
  std::vector<std::string> paths;
  std::vector<std::string> nagle_paths;
  std::string profile = "seed";
  int new_count = -1, reuse_count = -1, warmup = -1;  // -1: from the profile
  std::string out = "vlessbench-out";
  std::optional<std::uint64_t> seed;
  double timeout_s = 5;
  int pause_ms = 2;
  std::string vless_nodelay = "on";
  std::string vless_writes = "one";
  bool allow_mismatch = false;
  int abort_after = 5;
  std::string bulk;  // --bulk SIZE
  double max_failed_pct = 10;
  int progress_every_s = 10;
  std::string export_markdown;  // --export-markdown FILE
  bool verify = false;          // --verify: against --daemon at the end
  std::string daemon, token;    // the admin listener and its token
  int verify_wait_s = -1;       // -1: by target kind (verify_wait_for)
};

// Seconds a verify may wait for lines the daemon writes later: a UDP flow's udp.packet at its idle
// timeout ([limits] udp_idle_timeout_ms, 60 s by default), a banner connection's line at close.
int verify_wait_for(std::string_view target) {
  if (target.starts_with("udp://") || target.starts_with("dns://")) return 75;
  if (target.starts_with("banner://")) return 10;
  return 0;
}

// --token, or VLESSBENCH_ADMIN_TOKEN (kept out of the process list and shell history).
std::string admin_token(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("VLESSBENCH_ADMIN_TOKEN");
  return env ? env : "";
}

// "64M", "1G", "4096", "512K": binary units (KiB, MiB, GiB); false on anything else.
bool parse_size(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  std::uint64_t unit = 1;
  switch (text.back()) {
    case 'k':
    case 'K': unit = 1ull << 10; break;
    case 'm':
    case 'M': unit = 1ull << 20; break;
    case 'g':
    case 'G': unit = 1ull << 30; break;
    default: break;
  }
  if (unit != 1) text.remove_suffix(1);
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v == 0 || v > (64ull << 30) / unit) return false;
  out = v * unit;
  return true;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

std::string shell_quote(std::string_view arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_./:=@,+%") == std::string_view::npos)
    return std::string(arg);
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string make_run_id(std::uint64_t entropy) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(stats::prng(entropy).next()));
  return std::string(buf, 12);
}

// The run's options from its arguments; a usage error is printed and its exit code returned
// (exit_ok: o is complete). given_paths: the paths as given, before --bulk doubles them.
int options_of(const run_args& a, measure_options& o, std::size_t& given_paths) {
  std::string reason;
  const auto target = parse_target_url(a.target, reason);
  if (!target) {
    std::cerr << "--target: " << reason << "\n";
    return exit_usage;
  }
  o.target = *target;
  for (const auto& text : a.paths) {
    auto p = parse_path_arg(text, reason);
    if (!p) {
      std::cerr << "--path: " << reason << "\n";
      return exit_usage;
    }
    o.paths.push_back(std::move(*p));
  }
  if (!apply_nagle_paths(o.paths, a.nagle_paths, reason)) {
    std::cerr << "--nagle-paths: " << reason << "\n";
    return exit_usage;
  }
  const auto baseline = finalize_paths(o.paths, reason);
  if (!baseline) {
    std::cerr << "--path: " << reason << "\n";
    return exit_usage;
  }
  o.baseline = *baseline;
  if (!check_paths_for_target(o.paths, o.target, reason)) {
    std::cerr << "--path: " << reason << "\n";
    return exit_usage;
  }
  given_paths = o.paths.size();
  if (!a.bulk.empty()) {
    if (!parse_size(a.bulk, o.bulk_bytes)) {
      std::cerr << "--bulk: expected a size such as 64M, 1G or 1048576 (at most 64G), got '" << a.bulk << "'\n";
      return exit_usage;
    }
    if (o.target.scheme != target_scheme::http && o.target.scheme != target_scheme::https) {
      std::cerr << "--bulk: needs an http:// or https:// target (GET /bytes/N, POST /sink)\n";
      return exit_usage;
    }
    o.paths = bulk_paths(o.paths);
  }
  const bool bulk = o.bulk_bytes > 0;
  const bool vless_profile = a.profile == "vless";
  // A bulk sample moves SIZE bytes: a handful per path and direction, not hundreds.
  o.new_count = a.new_count >= 0 ? a.new_count : (bulk ? 3 : vless_profile ? 100 : 300);
  o.reuse_count = a.reuse_count >= 0 ? a.reuse_count : (bulk ? 5 : vless_profile ? 200 : 500);
  o.warmup = a.warmup >= 0 ? a.warmup : (bulk ? 1 : vless_profile ? 10 : 20);
  if (o.new_count + o.reuse_count == 0) {
    std::cerr << "--new and --reuse are both 0: nothing to measure\n";
    return exit_usage;
  }
  o.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  o.pause = std::chrono::milliseconds(a.pause_ms);
  parse_on_off(a.vless_nodelay, o.vless_defaults.nodelay);
  o.vless_defaults.writes = a.vless_writes == "split" ? write_mode::split : write_mode::one;
  std::random_device rd;
  o.seed = a.seed ? *a.seed : (static_cast<std::uint64_t>(rd()) << 32 | rd());
  o.run_id =
      make_run_id(o.seed ^ static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  o.progress = isatty(STDERR_FILENO) == 1;
  o.progress_every_s = a.progress_every_s;
  o.handle_signals = true;
  o.abort_after_failed_rounds = a.abort_after;
  return exit_ok;
}

run_metadata metadata_of(const run_args& a, const measure_options& o, const std::string& command_line) {
  run_metadata meta;
  meta.run_id = o.run_id;
  meta.seed = o.seed;
  meta.version = VLESSBENCH_VERSION;
  meta.tls_library = OpenSSL_version(OPENSSL_VERSION);
  meta.asio_version = std::to_string(ASIO_VERSION / 100000) + "." + std::to_string(ASIO_VERSION / 100 % 1000) + "." +
                      std::to_string(ASIO_VERSION % 100);
  meta.host = host_name();
  meta.time_utc = utc_now();
  meta.command_line = command_line;
  meta.target = a.target;
  meta.bulk_bytes = o.bulk_bytes;
  meta.new_count = o.new_count;
  meta.reuse_count = o.reuse_count;
  meta.warmup = o.warmup;
  meta.timeout_ms = static_cast<int>(o.timeout.count());
  meta.pause_ms = a.pause_ms;
  meta.vless_defaults = o.vless_defaults;

  return meta;
}

// The paths' results; a bulk run's downloads and uploads each against their own direct baseline.
std::vector<path_result> results_of(const measure_options& o, const std::vector<sample>& samples,
                                    std::size_t given_paths) {
  std::vector<path_result> results;
  if (o.bulk_bytes == 0) {
    results = analyze(o.paths, o.baseline, samples, o.vless_defaults, o.seed);
    if (is_datagram(o.target.scheme))
      for (auto& r : results) r.stall = stall_not_applicable();
  } else {
    for (std::size_t half = 0; half < 2; ++half) {
      const std::vector<path_spec> part(o.paths.begin() + static_cast<std::ptrdiff_t>(half * given_paths),
                                        o.paths.begin() + static_cast<std::ptrdiff_t>((half + 1) * given_paths));
      auto r = analyze(part, o.baseline, samples, o.vless_defaults, o.seed);
      results.insert(results.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
    }
  }
  return results;
}

void write_run_files(const run_args& a, const run_metadata& meta, const std::vector<path_result>& results,
                     const std::vector<sample>& samples, const std::filesystem::path& out) {
  write_file(out / "samples.csv", samples_csv(samples));
  write_file(out / "summary.json", summary_json(meta, results));
  write_file(out / "report.svg", render_svg(meta, results));
  if (!a.export_markdown.empty()) write_file(a.export_markdown, format_markdown(meta, results));
  std::cout << format_table(results);
  std::cout << "\nrun " << meta.run_id << " in " << std::fixed << std::setprecision(1) << meta.duration_s
            << " s; wrote " << (out / "samples.csv").string() << ", summary.json, report.svg"
            << (a.export_markdown.empty() ? "" : ", " + a.export_markdown) << "\n";
  std::cout.flush();
}

// The exit code of a run that measured to its end (or was aborted): failures, failing paths,
// route mismatches, then --verify.
int run_verdict(const run_args& a, const run_metadata& meta, const std::vector<path_result>& results,
                const std::vector<sample>& samples, const std::filesystem::path& out) {
  std::size_t ok = 0, mismatches = 0;
  for (const auto& s : samples) {
    ok += s.ok ? 1 : 0;
    mismatches += s.route_mismatch ? 1 : 0;
  }
  const double max_failed_share = a.max_failed_pct / 100;
  const auto failing = failing_paths(results, max_failed_share);
  if (!meta.aborted.empty()) {
    // The files above hold what was measured before; they say "aborted" in summary.json.
    std::cerr << "vlessbench: run aborted: " << meta.aborted << "\n" << format_failing_paths(failing, max_failed_share);
    return exit_failed;
  }
  if (ok == 0) {
    std::cerr << "vlessbench: every sample failed\n" << format_failing_paths(failing, max_failed_share);
    return exit_failed;
  }
  if (!failing.empty()) {
    std::cerr << format_failing_paths(failing, max_failed_share);
    return exit_failing_path;
  }
  if (mismatches > 0 && !a.allow_mismatch) {
    std::cerr << "vlessbench: " << mismatches << " route mismatches (see the routes above; "
              << "--allow-mismatch to accept)\n";
    return exit_failed;
  }
  if (a.verify) {
    std::cout << "\n";
    const int wait = a.verify_wait_s >= 0 ? a.verify_wait_s : verify_wait_for(a.target);
    try {
      const auto report = verify_against_daemon(read_file(out / "summary.json"), read_file(out / "samples.csv"),
                                                out / "daemon-log.jsonl", a.daemon, admin_token(a.token),
                                                std::chrono::seconds(wait), std::cerr);
      std::cout << format_verify_report(report);
      if (!report.ok()) return exit_verify_failed;
    } catch (const std::exception& e) {
      std::cerr << "vlessbench: --verify: " << e.what() << "\n";
      return exit_verify_failed;
    }
  }
  return exit_ok;
}

int do_run(const run_args& a, const std::string& command_line) {
  measure_options o;
  std::size_t given_paths = 0;
  if (const int code = options_of(a, o, given_paths); code != exit_ok) return code;
  run_metadata meta = metadata_of(a, o, command_line);

  const std::filesystem::path out = a.out;
  std::filesystem::create_directories(out);
  std::cout << "vlessbench run " << o.run_id << ": " << plural(o.paths.size(), "path", "paths") << ", " << o.new_count
            << " new + " << o.reuse_count << " reused samples each after "
            << plural(static_cast<std::size_t>(o.warmup), "warm-up", "warm-ups") << ", target " << a.target
            << std::endl;

  const auto started = std::chrono::steady_clock::now();
  measure_end end;
  const auto samples = measure(o, &end);
  if (end.signal != 0) {
    (void)std::signal(SIGINT, exit_at_once);
    (void)std::signal(SIGTERM, exit_at_once);
  }
  meta.aborted = end.aborted;
  meta.interrupted = end.interrupted;
  meta.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const auto results = results_of(o, samples, given_paths);
  write_run_files(a, meta, results, samples, out);

  if (end.signal != 0) {
    std::cerr << "vlessbench: interrupted by " << end.interrupted << ": " << plural(samples.size(), "sample", "samples")
              << " kept in " << out.string() << " (samples.csv, summary.json \"interrupted\", report.svg)\n";
    return exit_signal_base + end.signal;
  }
  return run_verdict(a, meta, results, samples, out);
}

// Edit distance, for "did you mean": a typo is one or two letters off.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The closest of names to word, when it is close enough to be a typo.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_d = 3;
  for (const auto& n : names)
    if (const auto d = edit_distance(word, n); d < best_d) best_d = d, best = n;
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

// CLI11 says "A subcommand is required" for an unknown command and lists an unknown option after
// its value ("not expected: 10 --nwe"): name the word the user typed instead, with the nearest.
std::string explain_usage_error(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].starts_with("-")) return "";
  std::vector<std::string> commands;
  const CLI::App* sub = nullptr;
  for (const auto* c : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(c->get_name());
    if (c->get_name() == args[0]) sub = c;
  }
  if (sub == nullptr)
    return "vlessbench: unknown command '" + args[0] + "'" + did_you_mean(args[0], commands) +
           "; the commands: run, compare, verify, clients";
  if (sub->get_allow_extras()) return "";
  std::vector<std::string> options{"--help"};
  for (const auto* o : sub->get_options())
    for (const auto& name : o->get_lnames()) options.push_back("--" + name);
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string word = args[i].substr(0, args[i].find('='));
    if (word.starts_with("--") && word.size() > 2 && std::find(options.begin(), options.end(), word) == options.end())
      return "vlessbench " + args[0] + ": unknown option " + word + did_you_mean(word, options) + " (vlessbench " +
             args[0] + " --help lists them)";
  }
  return "";
}

int do_compare(const std::vector<std::string>& dirs) {
  std::vector<std::pair<std::string, std::string>> runs;
  runs.reserve(dirs.size());
  for (const auto& d : dirs) runs.emplace_back(d, read_file(std::filesystem::path(d) / "summary.json"));
  std::cout << format_comparison(runs);
  return exit_ok;
}

struct verify_args {
  std::string dir, log, daemon, token;
  int wait_s = 0;
  int fetch_timeout_s = static_cast<int>(default_fetch_timeout.count());
};

int do_verify(const verify_args& a) {
  const std::filesystem::path d = a.dir;
  if (!a.daemon.empty()) {
    const auto report = verify_against_daemon(
        read_file(d / "summary.json"), read_file(d / "samples.csv"), d / "daemon-log.jsonl", a.daemon,
        admin_token(a.token), std::chrono::seconds(a.wait_s), std::cerr, std::chrono::seconds(a.fetch_timeout_s));
    std::cout << format_verify_report(report);
    return report.ok() ? exit_ok : exit_failed;
  }
  const std::string& log_path = a.log;
  std::ifstream log(log_path);
  if (!log) throw std::runtime_error("cannot read " + log_path);
  const auto report = verify_run(read_file(d / "summary.json"), read_file(d / "samples.csv"), log);
  std::cout << format_verify_report(report);
  return report.ok() ? exit_ok : exit_failed;
}

// `run`: its options into ra (the target kinds, udp:// and dns:// among them, in --target's help).
CLI::App* add_run_command(CLI::App& app, run_args& ra) {
  auto* run = app.add_subcommand("run", "measure paths, print the table, write samples.csv, summary.json, report.svg");
  run->add_option("--target", ra.target,
                  "target URL: http://H:P/PATH, https://H:P/PATH (inner TLS handshake reported as its own "
                  "phase), banner://H:P (the daemon's server-first target: time to first byte, echo), "
                  "udp://H:P (a datagram's round trip to the UDP echo) or dns://H:P/NAME (an A query to the "
                  "DNS responder)")
      ->capture_default_str();
  run->add_option("--bulk", ra.bulk,
                  "bulk run: every path becomes NAME/down (GET /bytes/SIZE) and NAME/up (POST /sink), "
                  "throughput in MB/s; SIZE like 64M or 1G (default counts 3 new + 5 reused after 1)");
  run->add_option(
         "--path", ra.paths,
         "NAME=SPEC; SPEC is direct, http://H:P (CONNECT), socks5://H:P (UDP ASSOCIATE for udp:// and dns://), "
         "tcp://H:P, tls://H:P (a bare TLS terminator), tun, tun://H:P or a vless:// link "
         "(extra query parameters nodelay=on|off and writes=one|split set that path's client)")
      ->take_all();
  run->add_option("--profile", ra.profile,
                  "default counts: seed (300 new + 500 reused after 20) "
                  "or vless (100 + 200 after 10)")
      ->check(CLI::IsMember({"seed", "vless"}))
      ->capture_default_str();
  run->add_option("--new", ra.new_count, "new-connection samples per path")->check(CLI::Range(0, 1000000));
  run->add_option("--reuse", ra.reuse_count, "reused-connection samples per path")->check(CLI::Range(0, 1000000));
  run->add_option("--warmup", ra.warmup, "unrecorded warm-up rounds before each phase")->check(CLI::Range(0, 100000));
  run->add_option("--out", ra.out, "output directory")->capture_default_str();
  run->add_option("--seed", ra.seed, "PRNG seed for path order and bootstrap (default random, recorded)");
  run->add_option("--timeout", ra.timeout_s, "seconds allowed for each socket operation")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  run->add_option("--abort-after", ra.abort_after,
                  "stop (exit 1, partial results written) when every path failed in N consecutive "
                  "rounds; 0 = never")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  run->add_option("--pause-ms", ra.pause_ms, "pause between samples")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  run->add_option("--vless-nodelay", ra.vless_nodelay, "built-in VLESS client: TCP_NODELAY (off = Linux default Nagle)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  run->add_option("--vless-writes", ra.vless_writes, "built-in VLESS client: header and GET in one write, or split")
      ->check(CLI::IsMember({"one", "split"}))
      ->capture_default_str();
  run->add_option("--nagle-paths", ra.nagle_paths,
                  "comma-separated vless path names whose client plays Nagle-prone "
                  "(as nodelay=off&writes=split in their links)")
      ->delimiter(',');
  run->add_flag("--allow-mismatch", ra.allow_mismatch, "exit 0 even when routes mismatch");
  run->add_option("--max-failed", ra.max_failed_pct,
                  "exit 3 when more than this percentage of a path's samples failed (a path with no "
                  "successful sample always does)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  run->add_option("--progress-every", ra.progress_every_s,
                  "when stderr is not a terminal: a progress line every S seconds (0 = none); a terminal "
                  "gets a bar with an ETA")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  run->add_option("--export-markdown", ra.export_markdown, "also write the table as Markdown to FILE");
  auto* run_verify = run->add_flag("--verify", ra.verify,
                                   "at the end, verify the run against the daemon's log fetched from --daemon "
                                   "(exit 4 when it fails)");
  auto* run_daemon = run->add_option("--daemon", ra.daemon,
                                     "the daemon's admin listener, http://HOST:PORT (GET /api/log), for --verify");
  run->add_option("--token", ra.token, "the admin listener's token (default: $VLESSBENCH_ADMIN_TOKEN)");
  run->add_option("--verify-wait", ra.verify_wait_s,
                  "seconds --verify may wait for lines the daemon writes later (default: 75 for udp:// and dns://, "
                  "a flow's line comes at its idle timeout; 10 for banner://; 0 otherwise)")
      ->check(CLI::Range(0, 3600));
  run_verify->needs(run_daemon);
  run_daemon->needs(run_verify);
  run->footer(exit_codes_help);
  return run;
}

// `verify`: its options into va.
CLI::App* add_verify_command(CLI::App& app, verify_args& va) {
  auto* verify = app.add_subcommand("verify", "check a run's samples against the daemon's access log");
  verify->add_option("dir", va.dir, "run output directory")->required()->check(CLI::ExistingDirectory);
  auto* verify_log = verify->add_option("--log", va.log, "the daemon's access log (JSON lines), copied here")
                         ->check(CLI::ExistingFile);
  auto* verify_daemon = verify->add_option(
      "--daemon", va.daemon, "or fetch the run's lines from the daemon's admin listener, http://HOST:PORT");
  verify_log->excludes(verify_daemon);
  verify->add_option("--token", va.token, "the admin listener's token (default: $VLESSBENCH_ADMIN_TOKEN)");
  verify
      ->add_option("--wait", va.wait_s,
                   "with --daemon: fetch again every 2 s for up to S seconds while samples are missing (lines "
                   "the daemon writes later: a UDP flow's at its idle timeout)")
      ->check(CLI::Range(0, 3600));
  verify->add_option("--fetch-timeout", va.fetch_timeout_s, "with --daemon: seconds one fetch of the lines may take")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  verify->callback([&va] {
    if (va.log.empty() && va.daemon.empty())
      throw CLI::ValidationError("verify", "give the daemon's log: --log FILE, or --daemon http://HOST:PORT");
  });

  return verify;
}

// `clients`: its options into ca; what it does not know goes to `run`.
CLI::App* add_clients_command(CLI::App& app, clients_args& ca) {
  auto* clients = app.add_subcommand(
      "clients",
      "the seed's comparison with the real cores you have: each core (mihomo, sing-box, xray, v2ray) "
      "gets a local HTTP entry to the node, then one run measures direct, the built-in client and "
      "every core; any option not listed here goes to `run` (e.g. --new 50 --reuse 100)");
  clients->add_option("--link", ca.links, "the node: a vless:// link (repeatable)");
  clients
      ->add_option("--links", ca.links_file, "a file whose vless:// lines are the nodes (`vlessbenchd links` output)")
      ->check(CLI::ExistingFile);
  clients->add_option("--core", ca.core_paths,
                      "NAME=PATH: a core's binary (default: found on PATH), "
                      "e.g. --core mihomo='/Applications/Clash Verge.app/Contents/MacOS/verge-mihomo'");
  clients->add_option("--cores", ca.only, "only these cores (comma-separated: mihomo, sing-box, xray, v2ray)")
      ->delimiter(',')
      ->check(CLI::IsMember({"mihomo", "sing-box", "xray", "v2ray"}));
  clients->add_flag("--no-builtin", ca.no_builtin, "leave the built-in client out");
  clients->add_flag("--delay-tests", ca.delay_tests,
                    "instead of a run: each core's own delay test (mihomo's controller, unified-delay off and on) "
                    "or its formula (emulated: v2rayN, sing-box, Xray observatory) beside the true new and reused "
                    "times, in one table");
  clients->add_option("--delay-count", ca.delay_count, "--delay-tests: tests and samples per core and node")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  clients->add_option("--daemon-log", ca.daemon_log,
                      "--delay-tests: the daemon's access log, for the phases of the delay tests' own requests");
  clients->add_option("--out", ca.out, "output directory (the run's files; the cores' configs and logs in cores/)")
      ->capture_default_str();
  clients->allow_extras();

  return clients;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"vlessbench: measure proxy-client latency against the vlessbench appliance"};
  app.require_subcommand(1);
  app.set_version_flag("--version", VLESSBENCH_VERSION);
  app.footer(exit_codes_help);

  run_args ra;
  auto* run = add_run_command(app, ra);

  std::vector<std::string> compare_dirs;
  auto* compare = app.add_subcommand("compare", "print several runs side by side");
  compare->add_option("dirs", compare_dirs, "run output directories")->required()->check(CLI::ExistingDirectory);

  verify_args va;
  auto* verify = add_verify_command(app, va);

  clients_args ca;
  auto* clients = add_clients_command(app, ca);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string plain = explain_usage_error(app, std::vector<std::string>(argv + 1, argv + argc));
    if (plain.empty())
      (void)app.exit(e);
    else
      std::cerr << plain << "\n";
    return exit_usage;
  }
  if (*run && ra.paths.empty())
    std::cerr << "vlessbench run: no --path given: measuring direct alone (add --path NAME=vless://... from "
                 "`vlessbenchd links`, or a client's entry, --path NAME=http://H:P or socks5://H:P)\n";

  try {
    if (*run) {
      std::string command_line;
      for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + shell_quote(argv[i]);
      return do_run(ra, command_line);
    }
    if (*compare) return do_compare(compare_dirs);
    if (*verify) return do_verify(va);
    if (*clients) {
      ca.run_args = clients->remaining();
      return do_clients(ca, argv[0]);
    }
  } catch (const std::exception& e) {
    std::cerr << "vlessbench: " << e.what() << "\n";
    return exit_failed;
  }
  return exit_usage;
}

}  // namespace vlessbench::runner
