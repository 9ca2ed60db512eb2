-- docs/man/man.lua: a pandoc filter that makes a man page of a document in
-- docs/ (docs/CMakeLists.txt runs it):
--   - the document's own title (its level-1 heading) goes: the page's title
--     is .TH, from --metadata title and section;
--   - every other heading rises one level, so "## OPTIONS" is .SH OPTIONS and
--     "### file_source" is .SS;
--   - a link to another document of docs/ shows as its man page
--     ("topology.conf(5)"), or as its text for a document without one, since a
--     relative path means nothing to a reader of the installed page;
--   - a table gets column widths from its text (each column at least its
--     longest word, the rest shared by how much text a column holds) that fit
--     a page of 80 columns, and its cells are set ragged-right, so that tbl
--     and troff have nothing to warn about (pandoc gives every column of a
--     pipe table the same width, from the dashes of its separator line); a
--     table whose longest words alone do not fit (topology.md's key tables:
--     key, type, default, range, meaning) becomes a tagged list instead, as
--     man pages present options: the first cell the tag, then
--     "type: ...; default: ...", then the last cell;
--   - in the NAME section an em dash becomes "-", the separator whatis(1) and
--     lexgrog(1) recognise ("shmrun \- run a job").
-- Rejected: a sed over pandoc's output (it would have to know roff escapes).

local man_of = {
  ["shmrun.1.md"] = "shmrun(1)",
  ["topology.md"] = "topology.conf(5)",
  ["operators.md"] = "shmrun-operator(3)",
}

function Header(h)
  if h.level == 1 then
    return {}
  end
  h.level = h.level - 1
  return h
end

function Link(l)
  local target = l.target
  if target:match("^%a[%w+.-]*:") or target:match("^#") then
    return nil -- a URL, or an anchor: pandoc prints it as it is
  end
  local file = target:gsub("#.*$", ""):gsub("^.*/", "")
  local text = pandoc.utils.stringify(l.content)
  if man_of[file] and (text == file or text == target) then
    return pandoc.Str(man_of[file])
  end
  return l.content
end

-- Pandoc's man writer makes a column of relative width w "lw(w*70n)"; the
-- body of a section is indented 7n, and tbl puts 3n between columns: at
-- MANWIDTH=80 (a 78n line) the columns hold 71n - 3n per gap.
local man_line = 71
local man_scale = 70

local function cells_of(tbl)
  local rows = {}
  for _, r in ipairs(tbl.head.rows) do table.insert(rows, r) end
  for _, b in ipairs(tbl.bodies) do
    for _, r in ipairs(b.body) do table.insert(rows, r) end
  end
  return rows
end

local function len(text)
  return utf8.len(text) or #text
end

-- The rows of @tbl as a definition list: each body row's first cell is the
-- term; "header: cell" for the middle cells, then the last cell.
local function as_list(tbl)
  local head = tbl.head.rows[1]
  local names = {}
  for i, cell in ipairs(head and head.cells or {}) do
    names[i] = pandoc.utils.stringify(cell.contents)
  end
  local items = {}
  for _, b in ipairs(tbl.bodies) do
    for _, row in ipairs(b.body) do
      local cells = row.cells
      local term = pandoc.utils.blocks_to_inlines(cells[1].contents)
      local middle = {}
      for i = 2, #cells - 1 do
        local inl = pandoc.utils.blocks_to_inlines(cells[i].contents)
        if #inl > 0 then
          if #middle > 0 then
            table.insert(middle, pandoc.Str(";"))
            table.insert(middle, pandoc.Space())
          end
          if names[i] and names[i] ~= "" then
            table.insert(middle, pandoc.Str(names[i] .. ":"))
            table.insert(middle, pandoc.Space())
          end
          for _, x in ipairs(inl) do table.insert(middle, x) end
        end
      end
      local def = {}
      if #middle > 0 then table.insert(def, pandoc.Para(middle)) end
      if #cells > 1 then
        for _, x in ipairs(cells[#cells].contents) do table.insert(def, x) end
      end
      table.insert(items, {term, {def}})
    end
  end
  return pandoc.DefinitionList(items)
end

function Table(tbl)
  local k = #tbl.colspecs
  local longest, amount = {}, {}
  for i = 1, k do longest[i], amount[i] = 1, 1 end
  for _, row in ipairs(cells_of(tbl)) do
    for i, cell in ipairs(row.cells) do
      local text = pandoc.utils.stringify(cell.contents)
      amount[i] = math.max(amount[i], len(text))
      for word in text:gmatch("%S+") do
        longest[i] = math.max(longest[i], len(word) + 1)
      end
    end
  end
  local avail = man_line - 3 * (k - 1) - 1
  local need, extra = 0, 0
  for i = 1, k do
    need = need + longest[i]
    extra = extra + math.max(amount[i] - longest[i], 0)
  end
  if need > avail then
    return as_list(tbl)
  end
  local width = {}
  for i = 1, k do
    if extra == 0 then
      width[i] = longest[i]
    else
      local share = math.max(amount[i] - longest[i], 0) / extra
      width[i] = math.min(longest[i] + (avail - need) * share, amount[i] + 1)
    end
    tbl.colspecs[i] = {tbl.colspecs[i][1], math.floor(width[i] * 10) / 10 / man_scale}
  end
  return {pandoc.RawBlock("man", ".ad l"), tbl, pandoc.RawBlock("man", ".ad b")}
end

function Pandoc(doc)
  local in_name = false
  for _, b in ipairs(doc.blocks) do
    if b.t == "Header" then
      in_name = pandoc.utils.stringify(b.content) == "NAME"
    elseif in_name and b.t == "Para" then
      b.content = pandoc.walk_inline(pandoc.Span(b.content), {
        Str = function(s)
          if s.text == "—" then
            return pandoc.Str("-")
          end
        end,
      }).content
    end
  end
  return doc
end
