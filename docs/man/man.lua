-- docs/man/man.lua: a pandoc filter that makes a man page of a document in
-- docs/ (docs/CMakeLists.txt runs it):
--   - the document's own title (its level-1 heading) goes: the page's title
--     is .TH, from --metadata title and section;
--   - every other heading rises one level, so "## OPTIONS" is .SH OPTIONS and
--     "### file_source" is .SS;
--   - a link to another document of docs/ shows as its man page
--     ("topology.conf(5)"), or as its text for a document without one, since a
--     relative path means nothing to a reader of the installed page;
--   - every table becomes a tagged list, as man pages present options: the
--     first cell the tag, then "header: cell; ..." for the middle cells, then
--     the last cell. A tbl table warns ("table text block will not fit on one
--     page", "table wider than line width") at some terminal widths and not
--     at others, depending on where it falls on a page: a list reads the same
--     at every width and leaves troff nothing to warn about;
--   - the page is set ragged-right (.ad l), so that narrow terminals get no
--     "cannot adjust line" warnings;
--   - in the NAME section an em dash becomes "-", the separator whatis(1) and
--     lexgrog(1) recognise ("shmrun \- run a job").
-- Rejected: a sed over pandoc's output (it would have to know roff escapes);
-- tbl tables with column widths fitted to 80 columns (they warned at 60, 90
-- and 120).

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

-- A link to another document of docs/: its man page ("topology.conf(5)") when
-- its text is the file's name, else its text; nil for a URL or an anchor.
local function local_link(l)
  local target = l.target
  if target:match("^%a[%w+.-]*:") or target:match("^#") then
    return nil
  end
  local file = target:gsub("#.*$", ""):gsub("^.*/", "")
  local text = pandoc.utils.stringify(l.content)
  if man_of[file] and (text == file or text == target) then
    return {pandoc.Str(man_of[file])}, man_of[file]
  end
  return l.content, nil
end

-- Links in a list of inlines; "[topology.md](topology.md) (topology.conf(5))"
-- gives "topology.conf(5)" once.
function Inlines(inlines)
  local out = pandoc.List()
  local i = 1
  while i <= #inlines do
    local x = inlines[i]
    local repl, ref = nil, nil
    if x.t == "Link" then
      repl, ref = local_link(x)
    end
    if not repl then
      out:insert(x)
    else
      out:extend(repl)
      local s = inlines[i + 2]
      if ref and inlines[i + 1] and inlines[i + 1].t == "Space" and s and s.t == "Str" and
          s.text:sub(1, #ref + 2) == "(" .. ref .. ")" then
        local rest = s.text:sub(#ref + 3)
        if rest ~= "" then out:insert(pandoc.Str(rest)) end
        i = i + 2
      end
    end
    i = i + 1
  end
  return out
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
  return as_list(tbl)
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
  -- ragged-right throughout: long words (paths, key names) leave justified
  -- lines of a narrow terminal nothing to stretch ("cannot adjust line")
  doc.blocks:insert(1, pandoc.RawBlock("man", ".ad l"))
  return doc
end
