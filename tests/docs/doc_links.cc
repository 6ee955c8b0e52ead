// docs/links: the user docs hang together. Every relative link in README.md, CHANGELOG.md, docs/*.md
// and k8s/**/*.md resolves (the file exists and, for a "#fragment" into a Markdown file, a heading
// of that name does, with GitHub's heading slugs); every docs/*.md page is linked from README.md; and
// README.md stays short (at most kMaxReadmeLines lines), since the pages hold the detail.
// Usage: doc_links REPO_ROOT. Prints one line per problem, with file and line, and exits 1 on any.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// "At most about 200 lines" for the README, with a little slack for a growing docs table.
constexpr int kMaxReadmeLines = 220;

struct Link {
  int line;
  std::string target;
};

// One Markdown file's lines, and the lines outside fenced code blocks with inline code blanked out,
// so that `[a](b)` inside code is not taken for a link.
struct Page {
  std::vector<std::string> lines;
  std::vector<std::string> prose;  // same count as lines; code replaced by spaces
};

Page readPage(const fs::path& file) {
  Page page;
  std::ifstream in(file);
  std::string line;
  bool in_fence = false;
  while (std::getline(in, line)) {
    page.lines.push_back(line);
    size_t first = line.find_first_not_of(' ');
    bool fence = first != std::string::npos && line.compare(first, 3, "```") == 0;
    if (fence) in_fence = !in_fence;
    if (fence || in_fence) {
      page.prose.emplace_back();
      continue;
    }
    std::string text = line;
    bool in_code = false;
    for (char& c : text) {
      if (c == '`') in_code = !in_code;
      if (in_code || c == '`') c = ' ';
    }
    page.prose.push_back(text);
  }
  return page;
}

// Every [text](target) in the page's prose; images (![alt](src)) count as links too.
std::vector<Link> linksOf(const Page& page) {
  std::vector<Link> links;
  for (size_t i = 0; i < page.prose.size(); ++i) {
    const std::string& text = page.prose[i];
    for (size_t at = text.find("]("); at != std::string::npos; at = text.find("](", at + 2)) {
      size_t end = text.find(')', at + 2);
      if (end == std::string::npos) break;
      std::string target = text.substr(at + 2, end - at - 2);
      size_t space = target.find(' ');  // [a](b "title")
      if (space != std::string::npos) target.resize(space);
      links.push_back({static_cast<int>(i) + 1, target});
    }
  }
  return links;
}

// GitHub's anchor for a heading: lower case, punctuation dropped (but '-' and '_' kept), spaces to
// '-'; a repeated slug gets -1, -2, ...
std::set<std::string> anchorsOf(const Page& page) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool in_fence = false;
  for (const std::string& line : page.lines) {
    if (line.rfind("```", 0) == 0) in_fence = !in_fence;
    if (in_fence || line.empty() || line[0] != '#') continue;
    size_t text_at = line.find_first_not_of('#');
    if (text_at == std::string::npos || line[text_at] != ' ') continue;
    std::string slug;
    for (size_t i = text_at + 1; i < line.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(line[i]);
      if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80) {
        slug += static_cast<char>(std::tolower(c));
      } else if (c == ' ') {
        slug += '-';
      }
    }
    int n = seen[slug]++;
    anchors.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
  }
  return anchors;
}

bool isExternal(const std::string& target) {
  for (const char* scheme : {"http://", "https://", "mailto:", "ftp://"}) {
    if (target.rfind(scheme, 0) == 0) return true;
  }
  return false;
}

std::vector<fs::path> markdownFiles(const fs::path& root) {
  std::vector<fs::path> files;
  for (const char* name : {"README.md", "CHANGELOG.md"}) {
    if (fs::exists(root / name)) files.push_back(root / name);
  }
  for (const char* dir : {"docs", "k8s"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
    }
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: doc_links REPO_ROOT\n";
    return 2;
  }
  const fs::path root = fs::weakly_canonical(argv[1]);
  if (!fs::exists(root / "README.md")) {
    std::cerr << "doc_links: no README.md in " << root << "\n";
    return 2;
  }
  int problems = 0;
  auto report = [&](const fs::path& file, int line, const std::string& what) {
    std::cout << fs::relative(file, root).string() << ":" << line << ": " << what << "\n";
    ++problems;
  };

  std::set<fs::path> linked_from_readme;
  const std::vector<fs::path> files = markdownFiles(root);
  int links_checked = 0;
  for (const fs::path& file : files) {
    const Page page = readPage(file);
    for (const Link& link : linksOf(page)) {
      if (link.target.empty()) {
        report(file, link.line, "empty link target");
        continue;
      }
      if (isExternal(link.target)) continue;
      ++links_checked;
      size_t hash = link.target.find('#');
      std::string path_part = link.target.substr(0, hash);
      std::string anchor = hash == std::string::npos ? "" : link.target.substr(hash + 1);
      fs::path target = path_part.empty() ? file : fs::weakly_canonical(file.parent_path() / path_part);
      if (!fs::exists(target)) {
        report(file, link.line, "dead link '" + link.target + "': no " + fs::relative(target, root).string());
        continue;
      }
      if (file == root / "README.md") linked_from_readme.insert(target);
      if (!anchor.empty() && target.extension() == ".md" && anchorsOf(readPage(target)).count(anchor) == 0) {
        report(file, link.line,
               "dead link '" + link.target + "': " + fs::relative(target, root).string() + " has no heading '#" +
                   anchor + "'");
      }
    }
  }

  int pages = 0;
  for (const fs::path& file : files) {
    if (file.parent_path() != root / "docs") continue;
    ++pages;
    if (linked_from_readme.count(file) == 0) {
      report(root / "README.md", 1,
             "no link to " + fs::relative(file, root).string() + " (every docs/ page is linked)");
    }
  }

  const size_t readme_lines = readPage(root / "README.md").lines.size();
  if (readme_lines > static_cast<size_t>(kMaxReadmeLines)) {
    report(root / "README.md", static_cast<int>(readme_lines),
           std::to_string(readme_lines) + " lines, more than " + std::to_string(kMaxReadmeLines) +
               ": move the detail into a docs/ page");
  }

  std::cout << "doc_links: " << files.size() << " Markdown files, " << pages << " docs/ pages, " << links_checked
            << " relative links, README " << readme_lines << " lines: " << problems << " problem(s)\n";
  return problems == 0 ? 0 : 1;
}
